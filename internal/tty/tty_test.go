package tty_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/vkcounter/vkcounter/internal/tty"
)

func TestNotATerminal(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "log"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if tty.Is(f) || tty.Is(&bytes.Buffer{}) || tty.Is(nil) {
		t.Fatal("a file, a buffer or nil taken for a terminal")
	}
}
