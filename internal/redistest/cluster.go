package redistest

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/vkcounter/vkcounter/internal/redisconn"
)

// An OwnCluster is a Redis Cluster of a test's own (StartCluster):
// redis-server processes on free loopback ports keeping nothing on disk,
// killed when the test ends. A test that kills or reconfigures nodes uses
// one, never the shared cluster of EnvCluster.
type OwnCluster struct {
	// Masters are the addresses of the nodes started as masters; Replicas[i]
	// are those of master i's replicas.
	Masters  []string
	Replicas [][]string
	procs    map[string]*exec.Cmd
	nodes    map[string]*redis.Client // a plain client per node, for the test's own checks
	killed   map[string]bool
}

// StartCluster starts a Redis Cluster of masters masters, each with
// replicas replicas, the slots spread evenly over the masters, every node
// run with args (e.g. "--cluster-node-timeout", "2000"); it returns once
// every node says cluster_state:ok and every replica is in sync with its
// master. Without redis-server the test is skipped, or fails when
// EnvRequire is set.
func StartCluster(t testing.TB, masters, replicas int, args ...string) *OwnCluster {
	t.Helper()
	needServer(t)
	c := &OwnCluster{procs: map[string]*exec.Cmd{}, nodes: map[string]*redis.Client{}, killed: map[string]bool{}}
	args = append([]string{"--cluster-enabled", "yes"}, args...)
	start := func() string {
		addr, proc := startFresh(t, freeNodeAddr, args...)
		c.procs[addr] = proc
		nc := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
		t.Cleanup(func() { nc.Close() })
		c.nodes[addr] = nc
		return addr
	}
	for i := range masters {
		c.Masters = append(c.Masters, start())
		c.Replicas = append(c.Replicas, nil)
		for range replicas {
			c.Replicas[i] = append(c.Replicas[i], start())
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("redistest: start a cluster: %v", err)
		}
	}
	ids := map[string]string{}
	first := c.Masters[0]
	_, firstPort, _ := net.SplitHostPort(first)
	for addr, nc := range c.nodes {
		id, err := nc.ClusterMyID(ctx).Result()
		must(err)
		ids[addr] = id
		if addr != first {
			must(nc.ClusterMeet(ctx, "127.0.0.1", firstPort).Err())
		}
	}
	for i, m := range c.Masters {
		from, to := i*slotCount/masters, (i+1)*slotCount/masters-1
		slots := make([]int, 0, to-from+1)
		for s := from; s <= to; s++ {
			slots = append(slots, s)
		}
		must(c.nodes[m].ClusterAddSlots(ctx, slots...).Err())
	}
	// A replica can follow only a master it knows.
	must(c.await(ctx, func(nc *redis.Client) error {
		nodes, err := nc.ClusterNodes(ctx).Result()
		if err == nil && strings.Count(strings.TrimSpace(nodes), "\n")+1 < len(c.nodes) {
			err = fmt.Errorf("knows %d nodes of %d", strings.Count(strings.TrimSpace(nodes), "\n")+1, len(c.nodes))
		}
		return err
	}))
	for i, rs := range c.Replicas {
		for _, r := range rs {
			must(c.nodes[r].ClusterReplicate(ctx, ids[c.Masters[i]]).Err())
		}
	}
	must(c.await(ctx, func(nc *redis.Client) error {
		info, err := nc.ClusterInfo(ctx).Result()
		switch {
		case err != nil:
			return err
		case !strings.Contains(info, "cluster_state:ok"):
			return fmt.Errorf("cluster_state not ok")
		}
		repl, err := nc.Info(ctx, "replication").Result()
		switch {
		case err != nil:
			return err
		case strings.Contains(repl, "role:slave") && !strings.Contains(repl, "master_link_status:up"):
			return fmt.Errorf("replica not in sync")
		}
		return nil
	}))
	return c
}

// slotCount is the number of hash slots of a Redis Cluster.
const slotCount = 16384

// await calls check on every live node every 20 ms until it returns nil
// for all of them, or ctx ends (its last error then).
func (c *OwnCluster) await(ctx context.Context, check func(*redis.Client) error) error {
	for {
		var err error
		for addr, nc := range c.nodes {
			if c.killed[addr] {
				continue
			}
			if e := check(nc); e != nil {
				err = fmt.Errorf("%s: %w", addr, e)
				break
			}
		}
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// freeNodeAddr returns a free loopback address whose port plus 10000 (the
// node's cluster bus) is free too.
func freeNodeAddr(t testing.TB) string {
	t.Helper()
	for range 100 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		bus, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port+10000))
		ln.Close()
		if err == nil {
			bus.Close()
			return ln.Addr().String()
		}
	}
	t.Fatal("redistest: no free port with a free cluster bus port")
	return ""
}

// Seeds returns the masters' addresses, comma-separated (REDIS_CLUSTER).
func (c *OwnCluster) Seeds() string { return strings.Join(c.Masters, ",") }

// Target returns the cluster as a Cluster Target whose Client is opened
// as the service opens its clients (redisconn), closed when t ends.
func (c *OwnCluster) Target(t testing.TB) *Target {
	t.Helper()
	return &Target{Kind: Cluster, Client: open(t, redisconn.Config{Cluster: c.Masters}), Addr: c.Masters[0]}
}

// Kill kills the node at addr with SIGKILL, as a crash would, and waits
// until it has exited.
func (c *OwnCluster) Kill(t testing.TB, addr string) {
	t.Helper()
	p := c.procs[addr]
	if p == nil {
		t.Fatalf("redistest: no node %s", addr)
	}
	if err := p.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	p.Wait()
	c.killed[addr] = true
}

// MasterOf returns the address of the master serving slot, in the slot
// map of the first live node that answers.
func (c *OwnCluster) MasterOf(ctx context.Context, slot int) (string, error) {
	var err error
	for _, addr := range slices.Concat(c.Masters, slices.Concat(c.Replicas...)) {
		if c.killed[addr] {
			continue
		}
		var slots []redis.ClusterSlot
		if slots, err = c.nodes[addr].ClusterSlots(ctx).Result(); err != nil {
			continue
		}
		for _, s := range slots {
			if s.Start <= slot && slot <= s.End && len(s.Nodes) > 0 {
				return s.Nodes[0].Addr, nil
			}
		}
		return "", fmt.Errorf("slot %d: served by no node, as %s sees it", slot, addr)
	}
	return "", err
}

// AwaitPromoted waits until every live node says cluster_state:ok and
// serves no slot from a killed node (the cluster has failed over), and
// returns when it saw that; it fails t if that takes over timeout.
func (c *OwnCluster) AwaitPromoted(t testing.TB, timeout time.Duration) time.Time {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	err := c.await(ctx, func(nc *redis.Client) error {
		info, err := nc.ClusterInfo(ctx).Result()
		if err != nil {
			return err
		}
		if !strings.Contains(info, "cluster_state:ok") {
			return fmt.Errorf("cluster_state not ok")
		}
		slots, err := nc.ClusterSlots(ctx).Result()
		if err != nil {
			return err
		}
		for _, s := range slots {
			if len(s.Nodes) == 0 || c.killed[s.Nodes[0].Addr] {
				return fmt.Errorf("slots %d-%d still on a killed master", s.Start, s.End)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("redistest: the cluster did not fail over within %v: %v", timeout, err)
	}
	return time.Now()
}
