// Package together runs a test operation in many goroutines released at
// the same instant, to provoke the races a test means to rule out.
package together

import (
	"errors"
	"sync"
	"testing"
)

// Run calls op(i) for every i in [0, n), each in its own goroutine, all
// released at once, and returns the results in index order. It fails t
// with the joined errors if any call failed.
func Run[T any](t testing.TB, n int, op func(i int) (T, error)) []T {
	t.Helper()
	got := make([]T, n)
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			got[i], errs[i] = op(i)
		})
	}
	close(start)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	return got
}
