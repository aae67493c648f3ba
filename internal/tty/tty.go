// Package tty tells whether output goes to a terminal, so that live
// progress lines and colours are used only where a person watches.
package tty

import (
	"io"
	"os"

	"github.com/mattn/go-isatty"
)

// Is reports whether w is a terminal (a Cygwin or MSYS one included).
func Is(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && (isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd()))
}
