package redisconn

// OnSend makes b call f with each pipeline's size before sending it; set
// it before the first Run.
func OnSend(b *Batcher, f func(n int)) { b.sent = f }

// Waiting is how many calls of b wait for a pipeline.
func Waiting(b *Batcher) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.waiting)
}

// Flying is how many of b's goroutines are sending pipelines.
func Flying(b *Batcher) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.flying
}
