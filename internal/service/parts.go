package service

import "context"

// A part is one component of the service. Each holds what it opened (Redis
// clients, stores, listeners, workers) and closes all of it in close, which
// tolerates a part opened only half-way. Each has a constructor of its own,
// in its own file, and Main holds it in a named field.
type part interface {
	close(ctx context.Context) error
}

// opened adds p, just made by its constructor (openRedis, openCounters,
// openBot, openHTTP, openPort, openPollers, openWorkers), to the parts
// Close closes in reverse: each may use the ones before it, and is closed
// even if its constructor failed half-way.
func (m *Main) opened(p part) { m.parts = append(m.parts, p) }
