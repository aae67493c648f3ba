package participant_test

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

	"github.com/vkcounter/vkcounter/counters/internal/filestore"
	"github.com/vkcounter/vkcounter/counters/participant"
)

// seedCnt is the bbs.cnt of the BBS specification.
const seedCnt = "3789011499,1762615624\n2500871836,1762615696\n"

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestFileSeedCnt reads the specification's bbs.cnt as it is and visits
// it from 192.168.1.1.
func TestFileSeedCnt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bbs.cnt")
	writeFile(t, path, seedCnt)
	c := newClock(bbsNow)
	f := newFile(t, path, c.Now)
	wantActive(t, f, participant.DefaultName, fiveMins, 2)
	visit(t, f, participant.DefaultName, participant.IPKey("192.168.1.1"), fiveMins, 3, true)
	want := seedCnt + "1727004492,1762615696\n"
	if got := readFile(t, path); got != want {
		t.Fatalf("bbs.cnt = %q, want %q", got, want)
	}

	// Five minutes on, the first entry has expired and the revisited
	// first key keeps its line.
	c.Set(1762615624 + 301)
	visit(t, f, participant.DefaultName, "2500871836", fiveMins, 2, false)
	want = "2500871836,1762615925\n1727004492,1762615696\n"
	if got := readFile(t, path); got != want {
		t.Fatalf("bbs.cnt = %q, want %q", got, want)
	}
}

// TestFileVisitMany checks the file a batch leaves: visited keys keep
// their lines (an expired one too, counted as new), keys not in the file
// are appended once each in the batch's order.
func TestFileVisitMany(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bbs.cnt")
	writeFile(t, path, seedCnt)
	c := newClock(1762615624 + 301) // 3789011499 has expired, 2500871836 has not
	f := newFile(t, path, c.Now)
	visitMany(t, f, participant.DefaultName, []string{"7", "2500871836", "5", "7", "3789011499"}, fiveMins, 4, 3)
	want := "3789011499,1762615925\n2500871836,1762615925\n7,1762615925\n5,1762615925\n"
	if got := readFile(t, path); got != want {
		t.Fatalf("bbs.cnt = %q, want %q", got, want)
	}
	// Another five minutes on, the unvisited keys are dropped.
	c.Set(1762615925 + 301)
	visitMany(t, f, participant.DefaultName, []string{"5", "9"}, fiveMins, 2, 2)
	want = "5,1762616226\n9,1762616226\n"
	if got := readFile(t, path); got != want {
		t.Fatalf("bbs.cnt = %q, want %q", got, want)
	}
}

// TestFileRecovery checks that damaged lines are skipped, the file is
// rewritten clean and every good line survives, whichever call finds them.
func TestFileRecovery(t *testing.T) {
	const good = "1,1762615600\n2,1762615601\n"
	tests := []struct {
		name, content, clean string
	}{
		{"half-written last line", good + "3,17626", good},
		{"half-written key", good + "3", good},
		{"garbage line", "1,1762615600\n\x00\xffjunk\n2,1762615601\n", good},
		{"empty line", "1,1762615600\n\n2,1762615601\n", good},
		{"no comma", "1,1762615600\n31762615602\n2,1762615601\n", good},
		{"empty key", "1,1762615600\n,1762615602\n2,1762615601\n", good},
		{"bad timestamp", "1,1762615600\n3,17626x\n2,1762615601\n3,-5\n", good},
		{"extra field", "1,1762615600\n3,1,2\n2,1762615601\n", good},
		{"duplicate key keeps the latest", "1,1762615500\n2,1762615601\n1,1762615600\n", good},
	}
	calls := []struct {
		name  string
		call  func(t *testing.T, f *participant.File)
		after func(clean string) string // the file after the call
	}{
		{"active", func(t *testing.T, f *participant.File) {
			wantActive(t, f, participant.DefaultName, fiveMins, 2)
		}, func(clean string) string { return clean }},
		{"leave of an absent key", func(t *testing.T, f *participant.File) {
			leave(t, f, participant.DefaultName, "9", 2, false)
		}, func(clean string) string { return clean }},
		{"visit", func(t *testing.T, f *participant.File) {
			visit(t, f, participant.DefaultName, "9", fiveMins, 3, true)
		}, func(clean string) string { return clean + "9,1762615696\n" }},
	}
	for _, tt := range tests {
		for _, call := range calls {
			t.Run(tt.name+"/"+call.name, func(t *testing.T) {
				path := filepath.Join(t.TempDir(), "bbs.cnt")
				writeFile(t, path, tt.content)
				f := newFile(t, path, newClock(bbsNow).Now)
				call.call(t, f)
				if got, want := readFile(t, path), call.after(tt.clean); got != want {
					t.Fatalf("bbs.cnt = %q, want %q", got, want)
				}
			})
		}
	}
}

// TestFileCRLF checks that CRLF line endings are read as lines, and
// that the next write uses the BBS's LF.
func TestFileCRLF(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bbs.cnt")
	crlf := strings.ReplaceAll(seedCnt, "\n", "\r\n")
	writeFile(t, path, crlf)
	f := newFile(t, path, newClock(bbsNow).Now)
	wantActive(t, f, participant.DefaultName, fiveMins, 2)
	if got := readFile(t, path); got != crlf {
		t.Fatalf("Active rewrote a clean file: %q", got)
	}
	visit(t, f, participant.DefaultName, "2500871836", fiveMins, 2, false)
	if got := readFile(t, path); got != seedCnt {
		t.Fatalf("bbs.cnt = %q, want %q", got, seedCnt)
	}
}

// TestFileLeaveAbsentTouchesNothing checks that a Leave that removes
// nothing does not rewrite a clean file.
func TestFileLeaveAbsentTouchesNothing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bbs.cnt")
	writeFile(t, path, seedCnt)
	before, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	f := newFile(t, path, newClock(bbsNow).Now)
	leave(t, f, participant.DefaultName, "1727004492", 2, false)
	after, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if !os.SameFile(before, after) || readFile(t, path) != seedCnt {
		t.Fatal("Leave of an absent key rewrote the file")
	}
}

func TestFileLayout(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "bbs.cnt")
	f := newFile(t, path, newClock(bbsNow).Now)
	visit(t, f, participant.DefaultName, "1", fiveMins, 1, true)
	visit(t, f, "vk.users", "42", fiveMins, 1, true)
	visit(t, f, "A/..", "7", fiveMins, 1, true)

	want := []string{
		".bbs.cnt.lock", "bbs.cnt", "bbs.cnt.d",
		"bbs.cnt.d/.%41%2F...lock", "bbs.cnt.d/.vk.users.lock", "bbs.cnt.d/%41%2F..", "bbs.cnt.d/vk.users",
	}
	var got []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		got = append(got, filepath.ToSlash(rel))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("files:\n got %q\nwant %q", got, want)
	}
	if got := readFile(t, filepath.Join(dir, "bbs.cnt.d", "vk.users")); got != "42,1762615696\n" {
		t.Fatalf("vk.users = %q", got)
	}
}

func TestFileRefusesKeysTheFormatCannotHold(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bbs.cnt")
	writeFile(t, path, seedCnt)
	f := newFile(t, path, newClock(bbsNow).Now)
	for _, key := range []string{"a,b", "a\nb", "a\r", ","} {
		if _, _, err := participant.Visit(context.Background(), f, participant.DefaultName, key, fiveMins); !errors.Is(err, participant.ErrInvalidKey) {
			t.Errorf("Visit(%q) error = %v, want ErrInvalidKey", key, err)
		}
		if _, _, err := f.Leave(context.Background(), participant.DefaultName, key); !errors.Is(err, participant.ErrInvalidKey) {
			t.Errorf("Leave(%q) error = %v, want ErrInvalidKey", key, err)
		}
	}
	if _, _, err := f.VisitMany(context.Background(), participant.DefaultName, []string{"1727004492", "a,b"}, fiveMins); !errors.Is(err, participant.ErrInvalidKey) {
		t.Errorf("VisitMany with a comma key: error = %v, want ErrInvalidKey", err)
	}
	if got := readFile(t, path); got != seedCnt {
		t.Fatalf("bbs.cnt changed to %q", got)
	}
}

func TestNewFile(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name, path string
		ok         bool
	}{
		{"empty path", "", false},
		{"a directory", dir, false},
		{"missing parent is created", filepath.Join(dir, "a", "b", "bbs.cnt"), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := participant.NewFile(tt.path, nil)
			if (err == nil) != tt.ok {
				t.Fatalf("NewFile(%q) error = %v, want ok=%v", tt.path, err, tt.ok)
			}
		})
	}
}

// childPathEnv, when set, makes TestFileTwoProcesses act as one of the
// child processes visiting the file at that path.
const childPathEnv = "VKCOUNTER_TEST_PARTICIPANT_CHILD_PATH"

// TestFileTwoProcesses runs two OS processes visiting one file at the
// same time, each with its own keys: no visit may be lost.
func TestFileTwoProcesses(t *testing.T) {
	const perChild = 200
	if path := os.Getenv(childPathEnv); path != "" {
		f := newFile(t, path, nil)
		w := bufio.NewWriter(os.Stdout)
		for i := range perChild {
			key := strconv.Itoa(os.Getpid()) + "-" + strconv.Itoa(i)
			n, isNew, err := participant.Visit(context.Background(), f, participant.DefaultName, key, time.Hour)
			if err != nil || !isNew {
				t.Fatalf("Visit(%s) = %d, %v, %v", key, n, isNew, err)
			}
			w.WriteString("active " + strconv.Itoa(n) + "\n")
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		return
	}
	if testing.Short() {
		t.Skip("spawns processes")
	}
	path := filepath.Join(t.TempDir(), "bbs.cnt")
	var outs [2]bytes.Buffer
	var cmds [2]*exec.Cmd
	for i := range cmds {
		cmds[i] = exec.Command(os.Args[0], "-test.run=^TestFileTwoProcesses$", "-test.count=1")
		cmds[i].Env = append(os.Environ(), childPathEnv+"="+path)
		cmds[i].Stdout = &outs[i]
		cmds[i].Stderr = &outs[i]
		if err := cmds[i].Start(); err != nil {
			t.Fatal(err)
		}
	}
	var counts []int
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("child %d: %v\n%s", i, err, outs[i].String())
		}
		for line := range strings.Lines(outs[i].String()) {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "active "); ok {
				n, err := strconv.Atoi(v)
				if err != nil {
					t.Fatal(err)
				}
				counts = append(counts, n)
			}
		}
	}
	// Each visit adds one key, so the counts are 1…400, each once.
	slices.Sort(counts)
	if len(counts) != 2*perChild {
		t.Fatalf("%d counts reported, want %d", len(counts), 2*perChild)
	}
	for i, n := range counts {
		if n != i+1 {
			t.Fatalf("sorted counts[%d] = %d, want %d", i, n, i+1)
		}
	}
	wantActive(t, newFile(t, path, nil), participant.DefaultName, time.Hour, 2*perChild)
}

// TestFileLockTimeout: while another holder (as another process would)
// keeps a name's lock, a Visit or Leave of that name fails at its
// context's deadline instead of waiting for the lock, and the other names
// are not held up; once the lock is let go, the name works again.
func TestFileLockTimeout(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bbs.cnt")
	f := newFile(t, path, nil)
	visit(t, f, "x", "a", time.Minute, 1, true) // creates bbs.cnt.d
	// Another Locker, as another process would: only the flock stands between them.
	held, err := new(filestore.Locker).Lock(context.Background(), filepath.Join(path+".d", ".x.lock"))
	if err != nil {
		t.Fatal(err)
	}
	const deadline = 200 * time.Millisecond
	errs := make(chan error, 2)
	start := time.Now()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), deadline)
		defer cancel()
		_, _, err := participant.Visit(ctx, f, "x", "b", time.Minute)
		errs <- err
	}()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), deadline)
		defer cancel()
		_, _, err := f.Leave(ctx, "x", "a")
		errs <- err
	}()
	visit(t, f, "y", "a", time.Minute, 1, true)
	visit(t, f, participant.DefaultName, "a", time.Minute, 1, true)
	for range 2 {
		if err := <-errs; !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("write of x while x is locked: %v, want the context's deadline", err)
		}
	}
	if took := time.Since(start); took > deadline+time.Second {
		t.Fatalf("writes of x gave up after %v, deadline %v", took, deadline)
	}
	held.Release()
	visit(t, f, "x", "b", time.Minute, 2, true)
}
