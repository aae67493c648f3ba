package access_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vkcounter/vkcounter/counters/access"
	"github.com/vkcounter/vkcounter/counters/internal/filestore"
	"github.com/vkcounter/vkcounter/internal/together"
)

// writeCounts writes count<i>.dat for each entry of files into dir.
func writeCounts(t *testing.T, dir string, files map[int]string) {
	t.Helper()
	for i, content := range files {
		if err := os.WriteFile(countPath(dir, i), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// readCounts reads count0.dat … count<levels-1>.dat in dir; a missing file
// reads as "<missing>".
func readCounts(t *testing.T, dir string, levels int) []string {
	t.Helper()
	out := make([]string, levels)
	for i := range out {
		b, err := os.ReadFile(countPath(dir, i))
		switch {
		case errors.Is(err, os.ErrNotExist):
			out[i] = "<missing>"
		case err != nil:
			t.Fatal(err)
		default:
			out[i] = string(b)
		}
	}
	return out
}

func countPath(dir string, i int) string {
	return filepath.Join(dir, "count"+strconv.Itoa(i)+".dat")
}

// TestFileSeedWalkthrough replays the BBS specification's example.
func TestFileSeedWalkthrough(t *testing.T) {
	dir := t.TempDir()
	writeCounts(t, dir, map[int]string{0: "925", 1: "924", 2: "923", 3: "922", 4: "921"})
	f := newFile(t, dir, 5)
	if got := total(t, f, access.DefaultName); got != 925 {
		t.Fatalf("Total of the BBS directory = %d, want 925", got)
	}
	if got := hit(t, f, access.DefaultName); got != 926 {
		t.Fatalf("Hit = %d, want 926", got)
	}
	want := []string{"925", "924", "923", "922", "926"}
	if got := readCounts(t, dir, 5); !slices.Equal(got, want) {
		t.Fatalf("files = %q, want %q", got, want)
	}
}

// TestFileAdd checks that Add writes total+n into the file holding the
// smallest value, as a Hit writes total+1, so a BBS directory stays valid.
func TestFileAdd(t *testing.T) {
	dir := t.TempDir()
	writeCounts(t, dir, map[int]string{0: "925", 1: "924", 2: "923", 3: "922", 4: "921"})
	f := newFile(t, dir, 5)
	if got := add(t, f, access.DefaultName, 10); got != 935 {
		t.Fatalf("Add(10) = %d, want 935", got)
	}
	if got := hit(t, f, access.DefaultName); got != 936 {
		t.Fatalf("Hit = %d, want 936", got)
	}
	if got := add(t, f, access.DefaultName, 100); got != 1036 {
		t.Fatalf("Add(100) = %d, want 1036", got)
	}
	want := []string{"925", "924", "1036", "936", "935"}
	if got := readCounts(t, dir, 5); !slices.Equal(got, want) {
		t.Fatalf("files = %q, want %q", got, want)
	}
}

// TestFileSeedConcurrent replays the specification's three concurrent
// requests, where the BBS answers 101 three times and loses two hits.
func TestFileSeedConcurrent(t *testing.T) {
	dir := t.TempDir()
	writeCounts(t, dir, map[int]string{0: "100", 1: "99", 2: "98"})
	f := newFile(t, dir, 3)
	got := together.Run(t, 3, func(int) (int64, error) { return access.Hit(context.Background(), f, access.DefaultName) })
	slices.Sort(got)
	if want := []int64{101, 102, 103}; !slices.Equal(got, want) {
		t.Fatalf("Hits returned %v, want %v", got, want)
	}
	// Each hit writes the smallest file: count2, then count1, then count0.
	if got, want := readCounts(t, dir, 3), []string{"103", "102", "101"}; !slices.Equal(got, want) {
		t.Fatalf("files = %q, want %q", got, want)
	}
}

func TestFileRecovery(t *testing.T) {
	const missing = "<missing>"
	tests := []struct {
		name      string
		files     []string // count0.dat … count4.dat; missing means absent
		wantTotal int64
		rewritten int // the file the next Hit must write
	}{
		{"missing file", []string{"10", "11", "12", "13", missing}, 13, 4},
		{"empty file", []string{"10", "11", "", "13", "12"}, 13, 2},
		{"truncated file", []string{"10", "1", "12", "13", "11"}, 13, 1},
		{"garbage file", []string{"10", "11", "12", "x9\x00", "13"}, 13, 3},
		{"negative value", []string{"-20", "11", "12", "13", "10"}, 13, 0},
		{"trailing newline accepted", []string{"10\n", "11", "12", "13\n", "14\r\n"}, 14, 0},
		{"several bad files", []string{missing, "", "7", "zz", missing}, 7, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			files := map[int]string{}
			for i, c := range tt.files {
				if c != missing {
					files[i] = c
				}
			}
			writeCounts(t, dir, files)
			f := newFile(t, dir, 5)
			if got := total(t, f, access.DefaultName); got != tt.wantTotal {
				t.Fatalf("Total = %d, want %d", got, tt.wantTotal)
			}
			if got := hit(t, f, access.DefaultName); got != tt.wantTotal+1 {
				t.Fatalf("Hit = %d, want %d", got, tt.wantTotal+1)
			}
			want := readCounts(t, dir, 5)
			copy(want, tt.files)
			want[tt.rewritten] = strconv.FormatInt(tt.wantTotal+1, 10)
			if got := readCounts(t, dir, 5); !slices.Equal(got, want) {
				t.Fatalf("files = %q, want %q", got, want)
			}
		})
	}
}

func TestFileUnrecoverable(t *testing.T) {
	tests := []struct {
		name      string
		files     map[int]string
		wantTotal error
		wantHit   int64 // 0: Hit must fail with wantTotal
	}{
		{"all garbage", map[int]string{0: "abc", 1: "", 2: "-1"}, access.ErrCorrupt, 0},
		{"all empty reads as never hit", map[int]string{0: "", 1: "", 2: ""}, access.ErrNotFound, 1},
		{"overflow", map[int]string{0: "9223372036854775807", 1: "5"}, nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			writeCounts(t, dir, tt.files)
			f := newFile(t, dir, 3)
			if _, err := f.Total(context.Background(), access.DefaultName); !errors.Is(err, tt.wantTotal) {
				t.Fatalf("Total error = %v, want %v", err, tt.wantTotal)
			}
			before := readCounts(t, dir, 3)
			n, err := access.Hit(context.Background(), f, access.DefaultName)
			if tt.wantHit != 0 {
				if err != nil || n != tt.wantHit {
					t.Fatalf("Hit = %d, %v; want %d", n, err, tt.wantHit)
				}
				return
			}
			wantErr := tt.wantTotal
			if wantErr == nil {
				wantErr = access.ErrOverflow
			}
			if !errors.Is(err, wantErr) {
				t.Fatalf("Hit = %d, %v; want %v", n, err, wantErr)
			}
			if after := readCounts(t, dir, 3); !slices.Equal(after, before) {
				t.Fatalf("a failed Hit changed the files: %q → %q", before, after)
			}
		})
	}
}

func TestNewFile(t *testing.T) {
	regular := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(regular, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		files  map[int]string
		dir    string // "" means a fresh temporary directory
		levels int
		ok     bool
	}{
		{name: "default levels", levels: 0, ok: true},
		{name: "one level", levels: 1, ok: true},
		{name: "max levels", levels: access.MaxLevels, ok: true},
		{name: "negative levels", levels: -1},
		{name: "too many levels", levels: access.MaxLevels + 1},
		{name: "directory is a file", dir: regular, levels: 5},
		{name: "more count files than levels", files: map[int]string{0: "1", 5: "2"}, levels: 5},
		{name: "count files matching levels", files: map[int]string{0: "1", 5: "2"}, levels: 6, ok: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := tt.dir
			if dir == "" {
				dir = t.TempDir()
				writeCounts(t, dir, tt.files)
			}
			f, err := access.NewFile(dir, tt.levels)
			if (err == nil) != tt.ok {
				t.Fatalf("NewFile(levels %d) error = %v, want ok=%v", tt.levels, err, tt.ok)
			}
			if f != nil && tt.levels == 0 {
				for range access.DefaultLevels + 1 {
					hit(t, f, access.DefaultName)
				}
				want := []string{"6", "2", "3", "4", "5", "<missing>"}
				if got := readCounts(t, dir, access.DefaultLevels+1); !slices.Equal(got, want) {
					t.Fatalf("files = %q, want %q", got, want)
				}
			}
		})
	}
	if _, err := access.NewFile("", 5); err == nil {
		t.Fatal("NewFile(\"\") succeeded")
	}
}

// TestFileLayout pins where counters live and what the files hold.
func TestFileLayout(t *testing.T) {
	dir := t.TempDir()
	f := newFile(t, dir, 2)
	hit(t, f, access.DefaultName)
	hit(t, f, "vk.messages")
	hit(t, f, "vk.messages")
	hit(t, f, "A/..")

	want := []string{
		"count.lock", "count0.dat",
		"names", "names/%41%2F..", "names/%41%2F../count.lock", "names/%41%2F../count0.dat",
		"names/vk.messages", "names/vk.messages/count.lock", "names/vk.messages/count0.dat", "names/vk.messages/count1.dat",
	}
	var got []string
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || path == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		got = append(got, filepath.ToSlash(rel))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("files under dir:\n got %q\nwant %q", got, want)
	}
	// The BBS writes a bare decimal: so do we.
	if got := readCounts(t, filepath.Join(dir, "names", "vk.messages"), 2); !slices.Equal(got, []string{"1", "2"}) {
		t.Fatalf("vk.messages files = %q", got)
	}
	fi, err := os.Stat(countPath(dir, 0))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o644 {
		t.Fatalf("count0.dat mode = %v, want 0644", fi.Mode().Perm())
	}
}

// The environment of the child processes TestFileTwoProcesses spawns.
const (
	// childDirEnv, when set, makes TestFileTwoProcesses act as one of the
	// child processes counting the counter in that directory.
	childDirEnv = "VKCOUNTER_TEST_ACCESS_CHILD_DIR"
	// childDeltaEnv is what each of the child's counts adds: 1 counts
	// with Hit, more with Add.
	childDeltaEnv = "VKCOUNTER_TEST_ACCESS_CHILD_DELTA"
)

// perChild is the number of counts each child process makes.
const perChild = 500

// TestFileTwoProcesses runs two OS processes counting one counter
// directory at the same time, with Hit and with Add: no count may be lost
// or repeated.
func TestFileTwoProcesses(t *testing.T) {
	if dir := os.Getenv(childDirEnv); dir != "" {
		countAsChild(t, dir, os.Getenv(childDeltaEnv))
		return
	}
	if testing.Short() {
		t.Skip("spawns processes")
	}
	t.Run("hit", func(t *testing.T) { twoProcesses(t, 1) })
	t.Run("add", func(t *testing.T) { twoProcesses(t, 7) })
}

// countAsChild is the child's side of twoProcesses: perChild counts of
// delta on DefaultName in dir, each total printed on its own line.
func countAsChild(t *testing.T, dir, delta string) {
	n, err := strconv.ParseInt(delta, 10, 64)
	if err != nil {
		t.Fatalf("%s=%q: %v", childDeltaEnv, delta, err)
	}
	f := newFile(t, dir, 5)
	w := bufio.NewWriter(os.Stdout)
	for range perChild {
		var got int64
		if n == 1 {
			got = hit(t, f, access.DefaultName)
		} else {
			got = add(t, f, access.DefaultName, n)
		}
		w.WriteString("total " + strconv.FormatInt(got, 10) + "\n")
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
}

// twoProcesses starts two child processes counting delta on one fresh
// directory at once and checks that their totals are delta, 2·delta, …,
// each returned once, and that the final total is their sum.
func twoProcesses(t *testing.T, delta int64) {
	dir := t.TempDir()
	var outs [2]bytes.Buffer
	var cmds [2]*exec.Cmd
	for i := range cmds {
		cmds[i] = exec.Command(os.Args[0], "-test.run=^TestFileTwoProcesses$", "-test.count=1")
		cmds[i].Env = append(os.Environ(), childDirEnv+"="+dir, childDeltaEnv+"="+strconv.FormatInt(delta, 10))
		cmds[i].Stdout = &outs[i]
		cmds[i].Stderr = &outs[i]
		if err := cmds[i].Start(); err != nil {
			t.Fatal(err)
		}
	}
	var totals []int64
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("child %d: %v\n%s", i, err, outs[i].String())
		}
		n := 0
		for line := range strings.Lines(outs[i].String()) {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "total "); ok {
				x, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					t.Fatal(err)
				}
				totals = append(totals, x)
				n++
			}
		}
		if n != perChild {
			t.Fatalf("child %d reported %d totals, want %d:\n%s", i, n, perChild, outs[i].String())
		}
	}
	checkExactlyOnce(t, totals, 2*perChild, delta)
	if got, want := total(t, newFile(t, dir, 5), access.DefaultName), 2*perChild*delta; got != want {
		t.Fatalf("Total = %d, want %d", got, want)
	}
}

// TestFileLockTimeout: while another holder (as another process would)
// keeps a counter's lock, an Add of that counter fails at its context's
// deadline instead of waiting for the lock, and the other counters are
// not held up; once the lock is let go, the counter counts again.
func TestFileLockTimeout(t *testing.T) {
	dir := t.TempDir()
	f := newFile(t, dir, 0)
	hit(t, f, "x") // creates names/x
	// Another Locker, as another process would: only the flock stands between them.
	held, err := new(filestore.Locker).Lock(context.Background(), filepath.Join(dir, "names", "x", "count.lock"))
	if err != nil {
		t.Fatal(err)
	}
	const deadline = 200 * time.Millisecond
	errs := make(chan error, 2)
	start := time.Now()
	for range 2 {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), deadline)
			defer cancel()
			_, err := f.Add(ctx, "x", 1)
			errs <- err
		}()
	}
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	if n, err := f.Add(ctx, "y", 1); n != 1 || err != nil {
		t.Fatalf("Add(y) while x is locked = %d, %v", n, err)
	}
	if n, err := f.Add(ctx, access.DefaultName, 1); n != 1 || err != nil {
		t.Fatalf("Add(default) while x is locked = %d, %v", n, err)
	}
	for range 2 {
		if err := <-errs; !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Add(x) while x is locked: %v, want the context's deadline", err)
		}
	}
	if took := time.Since(start); took > deadline+time.Second {
		t.Fatalf("Add(x) gave up after %v, deadline %v", took, deadline)
	}
	held.Release()
	if got := add(t, f, "x", 1); got != 2 {
		t.Fatalf("Add(x) after the lock was let go = %d, want 2 (the failed Adds changed nothing)", got)
	}
}
