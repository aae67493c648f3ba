package service

import (
	"context"
	"sync"
)

// background is the process's own workers: the soft memory limit following
// the live heap and the status page's history. They stop first.
type background struct {
	stops []context.CancelFunc
	wg    sync.WaitGroup
}

// start runs fn in a goroutine until close; fn returns when its context
// ends.
func (b *background) start(fn func(ctx context.Context)) {
	ctx, cancel := context.WithCancel(context.Background())
	b.stops = append(b.stops, cancel)
	b.wg.Go(func() { fn(ctx) })
}

func (b *background) close(context.Context) error {
	for _, stop := range b.stops {
		stop()
	}
	b.wg.Wait()
	return nil
}

// openWorkers starts the process's own workers (background): the soft
// memory limit following the live heap and the status page's history.
func (m *Main) openWorkers(context.Context) error {
	m.workers = &background{}
	m.opened(m.workers)
	m.setMemoryLimit()
	m.sampleHistory()
	return nil
}
