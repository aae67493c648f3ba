package filestore_test

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vkcounter/vkcounter/counters/internal/filestore"
)

func TestPathName(t *testing.T) {
	long := strings.Repeat("/", filestore.MaxPathName/3+1)
	longSum := sha256.Sum256([]byte(long))
	tests := []struct {
		name, in, want string
	}{
		{"plain", "vk.messages", "vk.messages"},
		{"digits dash underscore", "a-1_b", "a-1_b"},
		{"slash", "a/b", "a%2Fb"},
		{"percent", "%41", "%2541"},
		{"upper case", "Ab", "%41b"},
		{"dot", ".", "%2E"},
		{"dot dot", "..", "%2E."},
		{"hidden", ".lock", "%2Elock"},
		{"inner dots", "a..b", "a..b"},
		{"binary", "\x00\xff", "%00%FF"},
		{"tilde", "~", "%7E"},
		{"at the limit", strings.Repeat("/", filestore.MaxPathName/3), strings.Repeat("%2F", filestore.MaxPathName/3)},
		{"utf-8 byte by byte", "é", "%C3%A9"},
		{"hashed when too long", long, "~" + hex.EncodeToString(longSum[:])},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := filestore.PathName(tt.in)
			if got != tt.want {
				t.Fatalf("PathName(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

// TestPathNameInjective checks that tricky names never share a file name
// and that every file name is a single, safe path element.
func TestPathNameInjective(t *testing.T) {
	names := []string{"a", "A", "%41", "%2541", ".", "..", "%2E", "a/b", "a%2Fb", "~", "%7E", "\x00", "x.lock"}
	for n := filestore.MaxPathName/3 - 1; n <= filestore.MaxPathName/3+2; n++ {
		names = append(names, strings.Repeat("/", n), strings.Repeat("/", n)+"a", strings.Repeat("a", 3*n))
	}
	seen := map[string]string{}
	for _, name := range names {
		p := filestore.PathName(name)
		if other, ok := seen[p]; ok {
			t.Fatalf("PathName(%q) = PathName(%q) = %q", name, other, p)
		}
		seen[p] = name
		if p == "" || p[0] == '.' || strings.ContainsAny(p, "/\\\x00") || len(p) > filestore.MaxPathName {
			t.Fatalf("PathName(%q) = %q is not a safe file name", name, p)
		}
	}
}

func TestWriteFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "count0.dat")
	if err := filestore.WriteFile(path, []byte("1")); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := filestore.WriteFile(path, []byte("22")); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil || string(b) != "22" {
		t.Fatalf("content = %q, %v; want 22", b, err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode = %v, want the existing 0600 kept", fi.Mode().Perm())
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Fatalf("directory holds %d entries, want only count0.dat (no temporary file left)", len(entries))
	}
	if err := filestore.WriteFile(filepath.Join(dir, "missing", "x"), nil); err == nil {
		t.Fatal("WriteFile into a missing directory succeeded")
	}
}

// TestFlockExcludes increments a number in a file from many goroutines,
// each with a Locker of its own (so opening the lock on its own file
// descriptor, with no semaphore shared) and guarded only by the flock: a
// lock that failed to exclude would lose increments.
func TestFlockExcludes(t *testing.T) {
	dir := t.TempDir()
	lockPath := filepath.Join(dir, "lock")
	dataPath := filepath.Join(dir, "n")
	const workers, each = 20, 25
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for range each {
				if errs[w] = increment(lockPath, dataPath); errs[w] != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(dataPath)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(b); got != strconv.Itoa(workers*each) {
		t.Fatalf("n = %s, want %d", got, workers*each)
	}
	var l filestore.Locker
	if _, err := l.Lock(context.Background(), filepath.Join(dir, "missing", "lock")); err == nil {
		t.Fatal("Lock in a missing directory succeeded")
	}
}

func increment(lockPath, dataPath string) error {
	var own filestore.Locker
	l, err := own.Lock(context.Background(), lockPath)
	if err != nil {
		return err
	}
	defer l.Release()
	b, err := os.ReadFile(dataPath)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	n, _ := strconv.Atoi(string(b))
	return filestore.WriteFile(dataPath, []byte(strconv.Itoa(n+1)))
}

// TestLockerExcludes increments a number in a file from goroutines of two
// Lockers (two stores on one directory): their semaphores are separate,
// so only the flock keeps them apart.
func TestLockerExcludes(t *testing.T) {
	dir := t.TempDir()
	lockPath := filepath.Join(dir, "lock")
	dataPath := filepath.Join(dir, "n")
	var lockers [2]filestore.Locker
	const workers, each = 10, 25
	errs := make([]error, 2*workers)
	var wg sync.WaitGroup
	for w := range 2 * workers {
		wg.Go(func() {
			for range each {
				l, err := lockers[w%2].Lock(context.Background(), lockPath)
				if err != nil {
					errs[w] = err
					return
				}
				errs[w] = incrementLocked(dataPath)
				l.Release()
				if errs[w] != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(dataPath)
	if err != nil || string(b) != strconv.Itoa(2*workers*each) {
		t.Fatalf("n = %s (%v), want %d", b, err, 2*workers*each)
	}
	for i := range lockers {
		if n := filestore.LockerPaths(&lockers[i]); n != 0 {
			t.Fatalf("locker %d still tracks %d lock files", i, n)
		}
	}
}

func incrementLocked(dataPath string) error {
	b, err := os.ReadFile(dataPath)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	n, _ := strconv.Atoi(string(b))
	return filestore.WriteFile(dataPath, []byte(strconv.Itoa(n+1)))
}

// holdEnv, when set, makes TestLockerContext act as the child process
// holding the lock file it names until its standard input closes.
const holdEnv = "VKCOUNTER_TEST_FILESTORE_HOLD"

// TestLockerContext: while another OS process holds a lock file, Lock on
// it (and every goroutine queued behind it) gives up when its context
// ends, other lock files stay free, and once the process lets go Lock
// gets it.
func TestLockerContext(t *testing.T) {
	if path := os.Getenv(holdEnv); path != "" {
		var own filestore.Locker
		l, err := own.Lock(context.Background(), path)
		if err != nil {
			t.Fatal(err)
		}
		os.Stdout.WriteString("locked\n")
		io.Copy(io.Discard, os.Stdin)
		l.Release()
		return
	}
	if testing.Short() {
		t.Skip("spawns a process")
	}
	dir := t.TempDir()
	held, free := filepath.Join(dir, "held.lock"), filepath.Join(dir, "free.lock")
	cmd := exec.Command(os.Args[0], "-test.run=^TestLockerContext$", "-test.count=1")
	cmd.Env = append(os.Environ(), holdEnv+"="+held)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer stdin.Close()
	if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || line != "locked\n" {
		t.Fatalf("child: %q, %v", line, err)
	}

	var l filestore.Locker
	const deadline = 200 * time.Millisecond
	errs := make(chan error, 3)
	start := time.Now()
	for range 3 { // one polls the flock, two queue behind it
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), deadline)
			defer cancel()
			lk, err := l.Lock(ctx, held)
			if err == nil {
				lk.Release()
			}
			errs <- err
		}()
	}
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	lk, err := l.Lock(ctx, free)
	if err != nil {
		t.Fatalf("Lock of another file while one is held: %v", err)
	}
	lk.Release()
	for range 3 {
		if err := <-errs; !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Lock of a file another process holds: %v, want the deadline", err)
		}
	}
	if took := time.Since(start); took > deadline+time.Second {
		t.Fatalf("Locks gave up after %v, deadline %v", took, deadline)
	}
	if n := filestore.LockerPaths(&l); n != 0 {
		t.Fatalf("locker still tracks %d lock files after every Lock ended", n)
	}

	stdin.Close() // the child lets go
	ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	lk, err = l.Lock(ctx, held)
	if err != nil {
		t.Fatalf("Lock once the other process let go: %v", err)
	}
	lk.Release()
	lk.Release() // a second Release is harmless
	if lk, err = l.Lock(ctx, held); err != nil {
		t.Fatalf("Lock after a double Release: %v", err)
	}
	lk.Release()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("child: %v", err)
	}
}
