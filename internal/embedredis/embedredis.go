// Package embedredis runs the in-process Redis (miniredis) that vkcounter
// uses when it is given no Redis server, so that anyone can try it with one
// command. Counts live only as long as the process.
package embedredis

import (
	"fmt"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
)

// A Server is an embedded Redis listening on a loopback port, whose keys
// expire in real time.
type Server struct {
	mini *miniredis.Miniredis
	stop chan struct{}
	wg   sync.WaitGroup
}

// Start starts a Server on 127.0.0.1 and a free port.
func Start() (*Server, error) {
	s := &Server{mini: miniredis.NewMiniRedis(), stop: make(chan struct{})}
	if err := s.mini.StartAddr("127.0.0.1:0"); err != nil {
		return nil, fmt.Errorf("start the embedded Redis: %w", err)
	}
	s.wg.Add(1)
	go s.tick()
	return s, nil
}

// tick makes TTLs run: without it keys never expire in miniredis.
// miniredis's own ClockTTL does the same but scans every key on every
// command, which slows each message as keys pile up; one FastForward a
// second costs that scan once a second.
func (s *Server) tick() {
	defer s.wg.Done()
	t := time.NewTicker(time.Second)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case now := <-t.C:
			s.mini.FastForward(now.Sub(last))
			last = now
		case <-s.stop:
			return
		}
	}
}

// Addr is the server's host:port.
func (s *Server) Addr() string { return s.mini.Addr() }

// Close stops the server; what it held is gone.
func (s *Server) Close() {
	close(s.stop)
	s.wg.Wait()
	s.mini.Close()
}
