package redisconn_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/vkcounter/vkcounter/internal/eventually"
	"github.com/vkcounter/vkcounter/internal/redisconn"
	"github.com/vkcounter/vkcounter/internal/redistest"
	"github.com/vkcounter/vkcounter/internal/soak"
)

// TestCause: each refusal has its cause, and what is no refusal (a
// missing key, the caller giving up, a script's own error) has none.
func TestCause(t *testing.T) {
	for err, want := range map[error]string{
		nil:                         "",
		redis.Nil:                   "",
		context.Canceled:            "",
		redis.ErrClosed:             "",
		fmt.Errorf("x: %w", io.EOF): "conn",
		&net.OpError{Op: "dial", Err: errors.New("connect: connection refused")}: "conn",
		context.DeadlineExceeded:                                               "timeout",
		redis.ErrPoolTimeout:                                                   "timeout",
		proto("MOVED 3999 127.0.0.1:6381"):                                     "moved",
		proto("ASK 3999 127.0.0.1:6381"):                                       "moved",
		proto("CLUSTERDOWN The cluster is down"):                               "clusterdown",
		proto("TRYAGAIN Multiple keys request during rehashing of slot"):       "tryagain",
		proto("READONLY You can't write against a read only replica."):         "readonly",
		proto("MASTERDOWN Link with MASTER is down"):                           "masterdown",
		proto("LOADING Redis is loading the dataset in memory"):                "loading",
		proto("OOM command not allowed when used memory > 'maxmemory'."):       "oom",
		proto("BUSY Redis is busy running a script."):                          "busy",
		proto("ERR DB capacity quota exceeded"):                                "oom",   // Upstash
		proto("ERR Out of memory"):                                             "oom",   // Dragonfly
		proto("Out of memory"):                                                 "oom",   // Dragonfly, without ERR
		proto("ERR max requests limit exceeded. Limit: 500000, Usage: 500000"): "quota", // Upstash
		proto("ERR max daily request limit exceeded"):                          "quota", // Upstash, daily plans
		proto("STREAM_FULL"):                                                   "",
		proto("ERR wrong number of arguments"):                                 "",
		proto("NOSCRIPT No matching script."):                                  "",
	} {
		if got := redisconn.Cause(err); got != want {
			t.Errorf("Cause(%v) = %q, want %q", err, got, want)
		}
	}
}

// proto returns an error reply of Redis with text msg, as go-redis reads
// one (a redis.Error).
func proto(msg string) error { return replyError(msg) }

type replyError string

func (e replyError) Error() string { return string(e) }
func (replyError) RedisError()     {}

// TestSlot: Slot and SlotTag agree with Redis's CLUSTER KEYSLOT.
func TestSlot(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		ctx := context.Background()
		for _, key := range []string{"", "a", "hello", "{user1000}.following", "foo{}{bar}", "foo{{bar}}zap", "foo{bar}{zap}", "readyz{0}"} {
			want, err := tg.Client.ClusterKeySlot(ctx, key).Result()
			if err != nil {
				t.Fatal(err)
			}
			if got := redisconn.Slot(key); int64(got) != want {
				t.Errorf("Slot(%q) = %d, CLUSTER KEYSLOT %d", key, got, want)
			}
		}
		for _, slot := range []int{0, 1, 5460, 5461, 10922, 16383} {
			key := "{" + redisconn.SlotTag(slot) + "}x"
			if got, err := tg.Client.ClusterKeySlot(ctx, key).Result(); err != nil || got != int64(slot) {
				t.Errorf("CLUSTER KEYSLOT of %q = %d, %v; want %d", key, got, err, slot)
			}
		}
	}, redistest.Cluster)
}

// TestClusterFailoverFollowedSoak: a master of a cluster with replicas is
// killed while a client writes to one of its slots. Until the replica is
// promoted the writes fail (nothing is resent) and CheckSlots names the
// master's slot range; once it is promoted, the client reaches the new
// master within a reload (ReloadFloor) rather than go-redis's periodic
// reload (a minute), and so does a second client of the same cluster that
// made no call meanwhile. The refusals are counted by cause. A soak: a
// cluster's failover in the machine's time (cluster-node-timeout 2 s).
func TestClusterFailoverFollowedSoak(t *testing.T) {
	soak.Test(t)
	oc := redistest.StartCluster(t, 3, 1, "--cluster-node-timeout", "2000")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, idle := oc.Target(t).Client, oc.Target(t).Client
	const slot = 100
	key := "k{" + redisconn.SlotTag(slot) + "}"
	dead, err := oc.MasterOf(ctx, slot)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Set(ctx, key, 0, 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := idle.Get(ctx, key).Err(); err != nil {
		t.Fatal(err)
	}
	if err := redisconn.CheckSlots(ctx, c); err != nil {
		t.Fatalf("CheckSlots before the failover: %v", err)
	}
	conn := redisconn.Refusals("conn")

	oc.Kill(t, dead)
	killed := time.Now()
	err = redisconn.CheckSlots(ctx, c)
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("slots 0-5460 (%s): ", dead)) {
		t.Errorf("CheckSlots with the master down = %v, want it to name slots 0-5460 and %s", err, dead)
	}
	if err != nil && strings.Contains(err.Error(), "5461-") {
		t.Errorf("CheckSlots named a range that is served: %v", err)
	}
	type result struct {
		at  time.Time
		err error
	}
	var mu sync.Mutex
	var results []result
	done := make(chan struct{})
	stop := make(chan struct{})
	go func() { // writes every 10 ms until stopped
		defer close(done)
		for {
			err := c.Incr(ctx, key).Err()
			mu.Lock()
			results = append(results, result{time.Now(), err})
			mu.Unlock()
			select {
			case <-time.After(10 * time.Millisecond):
			case <-stop:
				return
			}
		}
	}()
	promoted := oc.AwaitPromoted(t, 30*time.Second)
	var failed int
	var firstOK time.Time
	i := 0
	eventually.True(t, 30*time.Second, "a write succeeds after the failover", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for ; i < len(results) && firstOK.IsZero(); i++ {
			switch r := results[i]; {
			case r.err != nil:
				failed++
			case r.at.After(promoted):
				firstOK = r.at
			}
		}
		return !firstOK.IsZero()
	})
	close(stop)
	<-done
	t.Logf("failover %v; writes refused %d; first write on the new master %v after the promotion was seen",
		promoted.Sub(killed).Round(time.Millisecond), failed, firstOK.Sub(promoted).Round(time.Millisecond))
	// The promotion is seen by polling every 20 ms; a reload is asked at
	// most every ReloadFloor and reads one node's slot map.
	if lag := firstOK.Sub(promoted); lag > 2*time.Second {
		t.Errorf("the client reached the new master %v after the promotion, want within a reload (ReloadFloor %v)", lag, redisconn.ReloadFloor)
	}
	if failed == 0 || redisconn.Refusals("conn") == conn {
		t.Errorf("%d writes refused, conn refusals %d → %d: want some while the master was down", failed, conn, redisconn.Refusals("conn"))
	}
	// The other client made no call: its slot map was reloaded with c's.
	newMaster, err := oc.MasterOf(ctx, slot)
	if err != nil {
		t.Fatal(err)
	}
	eventually.NoError(t, 2*time.Second, "the idle client's slot map refreshed", func() error {
		n, err := idle.(*redis.ClusterClient).MasterForKey(ctx, key) // the slot map only: no call
		if err != nil {
			return err
		}
		if addr := n.Options().Addr; addr != newMaster {
			return fmt.Errorf("the idle client still sends %s to %v, not %s", key, addr, newMaster)
		}
		return nil
	})
	if err := redisconn.CheckSlots(ctx, c); err != nil {
		t.Errorf("CheckSlots after the failover: %v", err)
	}
}
