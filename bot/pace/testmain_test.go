package pace_test

import (
	"os"
	"testing"

	"github.com/vkcounter/vkcounter/internal/redistest"
)

func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }
