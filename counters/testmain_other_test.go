//go:build !unix

package counters_test

import (
	"os"
	"testing"

	"github.com/vkcounter/vkcounter/internal/redistest"
)

// TestMain runs the tests through redistest.Main (bench_test.go's, with
// the benchmark server, is for unix only).
func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }
