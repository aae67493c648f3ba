// Package expiry is a queue of things that expire at a given second,
// earliest first, so that a store can drop what has expired a few at a
// time, at O(log n) per change, instead of sweeping everything it holds
// under its lock.
//
// A type that goes into a Queue embeds an Entry; the Queue keeps the
// entry's deadline and place. A Queue is not safe for concurrent use.
package expiry

import "container/heap"

// SlotBytes is the estimated memory an item takes in a Queue: a pointer,
// in an array up to twice as long as the items (its Entry is the item's).
const SlotBytes = 12

// An Entry is embedded by what goes into a Queue. Its zero value is not
// queued.
type Entry struct {
	at  int64 // the Unix second it expires at
	pos int   // its index in the queue plus one; 0 when not queued
}

// At returns the second the entry expires at, as last set.
func (e *Entry) At() int64 { return e.at }

func (e *Entry) entry() *Entry { return e }

// An Item is a pointer to a type that embeds Entry.
type Item interface{ entry() *Entry }

// A Queue holds items by deadline. The zero value is an empty queue.
type Queue[T Item] struct{ h items[T] }

// Set queues x to expire at the second at, or moves it there if queued.
func (q *Queue[T]) Set(x T, at int64) {
	e := x.entry()
	e.at = at
	if e.pos == 0 {
		heap.Push(&q.h, x)
		return
	}
	heap.Fix(&q.h, e.pos-1)
}

// Remove takes x out of the queue; it does nothing if x is not queued.
func (q *Queue[T]) Remove(x T) {
	if e := x.entry(); e.pos != 0 {
		heap.Remove(&q.h, e.pos-1)
	}
}

// PopDue removes and returns the earliest item if it expires at or before
// now.
func (q *Queue[T]) PopDue(now int64) (T, bool) {
	if len(q.h) == 0 || q.h[0].entry().at > now {
		var zero T
		return zero, false
	}
	return heap.Pop(&q.h).(T), true
}

// Len returns the number of items queued.
func (q *Queue[T]) Len() int { return len(q.h) }

// items is the heap.Interface of a Queue.
type items[T Item] []T

func (h items[T]) Len() int           { return len(h) }
func (h items[T]) Less(i, j int) bool { return h[i].entry().at < h[j].entry().at }
func (h items[T]) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].entry().pos = i + 1
	h[j].entry().pos = j + 1
}

func (h *items[T]) Push(x any) {
	*h = append(*h, x.(T))
	x.(T).entry().pos = len(*h)
}

func (h *items[T]) Pop() any {
	old := *h
	x := old[len(old)-1]
	var zero T
	old[len(old)-1] = zero
	*h = old[:len(old)-1]
	x.entry().pos = 0
	// Give back the array's unused half, so that a queue that emptied
	// does not keep its largest size.
	if c := cap(*h); c > 64 && len(*h) < c/4 {
		*h = append(items[T](nil), (*h)...)
	}
	return x
}
