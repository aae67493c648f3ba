package syncbuf

import (
	"strings"
	"sync"
	"testing"
)

// TestConcurrentWrites: writes from many goroutines, read while they run,
// all end up in the buffer.
func TestConcurrentWrites(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				b.Write([]byte("x"))
				_ = b.String()
			}
		}()
	}
	wg.Wait()
	if got := b.String(); got != strings.Repeat("x", 800) {
		t.Fatalf("buffer holds %d bytes, want 800", len(got))
	}
}
