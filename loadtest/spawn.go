package loadtest

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/vkcounter/vkcounter/internal/faultproxy"
)

// spawnTimeout bounds the start of a spawned service, and stopTimeout its
// shutdown after SIGTERM (it drains its replies first).
const (
	spawnTimeout = 15 * time.Second
	stopTimeout  = 20 * time.Second
	// serviceLogTail is how much of a spawned service's log is kept, to
	// show when it fails.
	serviceLogTail = 16 << 10
)

// A Service is a `vkcounter serve` process started by Spawn for a run.
type Service struct {
	cmd       *exec.Cmd
	listening Listening
	exited    chan struct{} // closed once the process has exited
	err       error         // Wait's result, set before exited is closed

	mu  sync.Mutex // guards log
	log []byte     // the tail of its stderr
}

// Listening is where a `vkcounter serve` listens, as its start-up line
// says: its public HTTP, admin and counter ports' addresses, "off" for a
// port it does not open.
type Listening struct{ HTTP, Admin, Counters string }

// ReadStartUpLine reads line, one line of `vkcounter serve`'s JSON log,
// and reports where the service listens when it is the start-up line
// ("vkcounter serving", logged once every port is open).
func ReadStartUpLine(line []byte) (Listening, bool) {
	var l struct {
		Message string
		Listening
	}
	if json.Unmarshal(line, &l) != nil || l.Message != "vkcounter serving" {
		return Listening{}, false
	}
	return l.Listening, true
}

// Spawn starts bin (empty: this program) as `vkcounter serve` with env
// added to this process's environment (an admin port on 127.0.0.1:0, JSON
// logs at info level), and waits until it logs that it is serving. Stop
// ends it.
func Spawn(ctx context.Context, bin string, env map[string]string) (*Service, error) {
	if bin == "" {
		var err error
		if bin, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("spawn: %w", err)
		}
	}
	cmd := exec.Command(bin, "serve")
	cmd.Env = append(os.Environ(), "ADMIN_ADDR=127.0.0.1:0")
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v) // later entries win
	}
	cmd.Env = append(cmd.Env, "LOG_LEVEL=info", "LOG_FORMAT=json")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, fmt.Errorf("spawn: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("spawn %s: %w", bin, err)
	}
	s := &Service{cmd: cmd, exited: make(chan struct{})}
	ready := make(chan Listening, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			s.keep(sc.Bytes())
			if l, ok := ReadStartUpLine(sc.Bytes()); ok {
				select {
				case ready <- l:
				default:
				}
			}
		}
		io.Copy(io.Discard, stderr)
		s.err = cmd.Wait()
		close(s.exited)
	}()
	select {
	case s.listening = <-ready:
		return s, nil
	case <-s.exited:
		return nil, fmt.Errorf("spawn: the service exited (%v) before serving:\n%s", s.err, s.tail())
	case <-time.After(spawnTimeout):
		err = fmt.Errorf("spawn: the service did not start serving within %v:\n%s", spawnTimeout, s.tail())
	case <-ctx.Done():
		err = ctx.Err()
	}
	cmd.Process.Kill()
	<-s.exited
	return nil, err
}

// HTTPAddr is the address of the service's public HTTP port.
func (s *Service) HTTPAddr() string { return s.listening.HTTP }

// CounterAddr is the address of the service's counter port, or "off".
func (s *Service) CounterAddr() string { return s.listening.Counters }

func (s *Service) keep(line []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.log = append(append(s.log, line...), '\n')
	if over := len(s.log) - serviceLogTail; over > 0 {
		s.log = s.log[over:]
	}
}

func (s *Service) tail() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return string(s.log)
}

// Stop sends SIGTERM and waits for the service to drain and exit, killing
// it after 20 seconds. A failed exit is reported with the log's tail.
func (s *Service) Stop() error {
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(stopTimeout):
		s.cmd.Process.Kill()
		<-s.exited
	}
	if s.err != nil {
		return fmt.Errorf("the spawned service exited with %v:\n%s", s.err, s.tail())
	}
	return nil
}

// ProxyRedis starts a fault proxy listening on listen in front of the
// server of redisURL, and returns it with the URL that reaches the server
// through it: the bot is given that URL, and the run's Redis faults act on
// the proxy.
func ProxyRedis(redisURL, listen string) (*faultproxy.Proxy, string, error) {
	u, err := url.Parse(redisURL)
	if err != nil || (u.Scheme != "redis" && u.Scheme != "rediss") || u.Host == "" {
		return nil, "", errors.New("-redis: Redis faults need a redis:// or rediss:// URL with a host")
	}
	target := u.Host
	if u.Port() == "" {
		target = net.JoinHostPort(u.Hostname(), "6379")
	}
	p, err := faultproxy.Listen(listen, target)
	if err != nil {
		return nil, "", fmt.Errorf("-redis-proxy-addr: %w", err)
	}
	u.Host = p.Addr()
	return p, u.String(), nil
}
