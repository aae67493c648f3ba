package redisconn

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// slotCount is the number of hash slots of a Redis Cluster.
const slotCount = 16384

// CheckSlots tells which slot ranges of a cluster the client c cannot
// serve now, or nil when it serves them all (or c is no cluster client):
// a range no node serves, or one whose master refuses a read of a key of
// the range (unreachable, CLUSTERDOWN, MOVED because c's slot map is
// behind), each named with its master and the error, such as "slots
// 5461-10922 (127.0.0.1:7001): dial tcp 127.0.0.1:7001: connect:
// connection refused". The slot map is the cluster's (CLUSTER SLOTS, from
// any node that answers); the reads go through c, as the service's calls
// do, and a refused one makes c follow the topology (see Open) without
// being counted in Refusals. One call reads one key per range, in one
// pipeline per node.
func CheckSlots(ctx context.Context, c redis.UniversalClient) error {
	cc, ok := c.(*redis.ClusterClient)
	if !ok {
		return nil
	}
	ctx = context.WithValue(ctx, uncounted{}, true)
	slots, err := slotMap(ctx, cc)
	if err != nil {
		return fmt.Errorf("cluster slots: %w", err)
	}
	slices.SortFunc(slots, func(a, b redis.ClusterSlot) int { return a.Start - b.Start })
	var problems []string
	next := 0 // the first slot not yet seen served
	pipe := cc.Pipeline()
	probes := make([]*redis.IntCmd, len(slots))
	for i, s := range slots {
		if s.Start > next {
			problems = append(problems, fmt.Sprintf("slots %d-%d: served by no node", next, s.Start-1))
		}
		next = max(next, s.End+1)
		probes[i] = pipe.Exists(ctx, probeKey(s.Start))
	}
	if next < slotCount {
		problems = append(problems, fmt.Sprintf("slots %d-%d: served by no node", next, slotCount-1))
	}
	if len(slots) > 0 {
		_, _ = pipe.Exec(ctx) // each probe has its own error
	}
	for i, s := range slots {
		if err := probes[i].Err(); err != nil {
			master := "no master"
			if len(s.Nodes) > 0 {
				master = s.Nodes[0].Addr
			}
			problems = append(problems, fmt.Sprintf("slots %d-%d (%s): %v", s.Start, s.End, master, err))
		}
	}
	if len(problems) == 0 {
		return nil
	}
	return errors.New(strings.Join(problems, "; "))
}

// slotMap returns the slot map (CLUSTER SLOTS) of the first node of c's
// that answers, masters and replicas asked at once: a node that is down
// must not hide the others' answer.
func slotMap(ctx context.Context, c *redis.ClusterClient) ([]redis.ClusterSlot, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var mu sync.Mutex
	var slots []redis.ClusterSlot
	var firstErr error
	err := c.ForEachShard(ctx, func(ctx context.Context, node *redis.Client) error {
		s, err := node.ClusterSlots(ctx).Result()
		mu.Lock()
		defer mu.Unlock()
		switch {
		case err == nil && slots == nil:
			slots = s
			cancel() // the other nodes' answers are not needed
		case err != nil && firstErr == nil && slots == nil:
			firstErr = fmt.Errorf("%s: %w", node.Options().Addr, err)
		}
		return nil
	})
	switch {
	case slots != nil:
		return slots, nil
	case err != nil:
		return nil, err
	case firstErr != nil:
		return nil, firstErr
	}
	return nil, errors.New("no node known")
}

// probeKey returns a key of the given slot: "readyz{" + SlotTag(slot) + "}".
func probeKey(slot int) string { return "readyz{" + SlotTag(slot) + "}" }

// SlotTag returns a hash tag of the cluster slot slot (0 to 16383): the
// smallest decimal number that hashes to it.
func SlotTag(slot int) string { return slotTags()[slot] }

var slotTags = sync.OnceValue(func() []string {
	tags := make([]string, slotCount)
	for i, left := 0, slotCount; left > 0; i++ {
		s := strconv.Itoa(i)
		if slot := Slot(s); tags[slot] == "" {
			tags[slot] = s
			left--
		}
	}
	return tags
})

// Slot returns the hash slot of key, as Redis Cluster computes it: the
// slot of the key's hash tag, or of the key without one. (go-redis keeps
// its own in an internal package.)
func Slot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	var crc uint16
	for i := 0; i < len(key); i++ {
		crc = crc<<8 ^ crcTable[byte(crc>>8)^key[i]]
	}
	return int(crc) % slotCount
}

// TagSlot is the hash slot of a hash tag given as bytes (Slot of "{tag}"),
// for callers that build keys on a hot path.
func TagSlot(tag []byte) int {
	var crc uint16
	for _, b := range tag {
		crc = crc<<8 ^ crcTable[byte(crc>>8)^b]
	}
	return int(crc) % slotCount
}

// crcTable is CRC16 (XMODEM, polynomial 0x1021) per byte.
var crcTable = func() (t [256]uint16) {
	for i := range t {
		crc := uint16(i) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
		t[i] = crc
	}
	return t
}()
