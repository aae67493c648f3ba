package service

import (
	"os"
	"testing"

	"github.com/vkcounter/vkcounter/internal/redistest"
)

// TestMain runs the tests through redistest.Main: it checks that they
// leave no key without a TTL in the shared Redis and reports skipped
// real-server variants.
func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }
