package outbox

import (
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// recoverMargin is added to the age of the oldest read under way when a
// recovery picks the entries it hands out: an entry delivered to that
// read is younger, even counting the time the recovery's own call takes
// to reach Redis.
const recoverMargin = time.Second

// handouts keeps, for one community, the rule that matters most: this
// instance never hands out an entry twice. Several calls of the instance
// can be given the same entry by Redis: a read of new entries, a takeover
// and a recovery of lost reads (all pending under the one consumer name),
// and a Drain's read that hands an entry back. So:
//
//   - an entry is handed out only if it is not held, and marked held in the
//     same step (handOut); it stays held until Done knows the outcome of
//     its acknowledgement (finished), or it is handed back (letGo, clear);
//   - a recovery looks only at entries older than every read under way
//     (beginRead, beginRecovery), since an entry a read was just given is
//     pending before it is held; and it skips the entries held when it
//     began;
//   - an entry finished while a recovery is under way is remembered until
//     every recovery has ended: one whose script ran before the
//     acknowledgement may return it after it is no longer held.
//
// Its methods take its own lock; each is one step of the rule.
type handouts struct {
	mu         sync.Mutex
	held       map[string]struct{}  // the ids handed out and not yet finished or let go
	reads      map[uint64]time.Time // when each call under way that may be given entries began
	seq        uint64               // numbers the calls in reads
	recovering int                  // recoveries under way
	doneDuring map[string]struct{}  // ids finished while a recovery was under way
	lost       bool                 // a read failed: its answer, and entries, may be lost
}

// beginRead notes that a call which may hand entries to this consumer (a
// read of new entries, a takeover, a recovery) begins now, until end is
// called, once the entries it returned are marked held. It returns how
// long an entry pending under this consumer must have been idle for no
// read then under way to have been handed it: 0 when none is under way,
// else the age of the oldest plus recoverMargin.
func (h *handouts) beginRead() (minIdle time.Duration, end func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.beginReadLocked()
}

func (h *handouts) beginReadLocked() (minIdle time.Duration, end func()) {
	now := time.Now()
	for _, began := range h.reads {
		minIdle = max(minIdle, now.Sub(began)+recoverMargin)
	}
	if h.reads == nil {
		h.reads = map[uint64]time.Time{}
	}
	h.seq++
	mark := h.seq
	h.reads[mark] = now
	return minIdle, func() {
		h.mu.Lock()
		delete(h.reads, mark)
		h.mu.Unlock()
	}
}

// beginRecovery begins a recovery of lost reads, a read itself (see
// beginRead): it returns the least idle time of an entry it may hand out,
// and the ids held now, which it must not. end ends it.
func (h *handouts) beginRecovery() (minIdle time.Duration, held []string, end func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	minIdle, endRead := h.beginReadLocked()
	h.recovering++
	held = make([]string, 0, len(h.held))
	for id := range h.held {
		held = append(held, id)
	}
	return minIdle, held, func() {
		h.mu.Lock()
		if h.recovering--; h.recovering == 0 {
			h.doneDuring = nil
		}
		h.mu.Unlock()
		endRead()
	}
}

// handOut calls give, in one step with the check, for each of msgs that
// is neither held nor finished during a recovery under way, and marks
// held those give takes (it returns false for an entry it will not hand
// out, such as one that does not decode).
func (h *handouts) handOut(msgs []redis.XMessage, give func(redis.XMessage) bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, m := range msgs {
		if _, ok := h.held[m.ID]; ok {
			continue
		}
		if _, ok := h.doneDuring[m.ID]; ok {
			continue // sent and finished by another sender of this instance
		}
		if give(m) {
			h.hold(m.ID)
		}
	}
}

// hold marks id held. h.mu must be held.
func (h *handouts) hold(id string) {
	if h.held == nil {
		h.held = map[string]struct{}{}
	}
	h.held[id] = struct{}{}
}

// holdToGiveBack marks held those of ids not held yet, and returns them:
// entries to be handed back to the outbox, which a recovery meanwhile
// must not hand out. letGo ends it.
func (h *handouts) holdToGiveBack(ids []string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, id := range ids {
		if _, ok := h.held[id]; !ok {
			h.hold(id)
			out = append(out, id)
		}
	}
	return out
}

// letGo forgets ids, handed back.
func (h *handouts) letGo(ids []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, id := range ids {
		delete(h.held, id)
	}
}

// finished forgets ids once the outcome of their acknowledgement is known
// (until then they stay held, so that a recovery cannot hand them out).
// Acknowledged while a recovery is under way, they are remembered until it
// ends (see handOut); not acknowledged, they are left to be recovered.
func (h *handouts) finished(ids []string, acked bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, id := range ids {
		delete(h.held, id)
		if acked && h.recovering > 0 {
			if h.doneDuring == nil {
				h.doneDuring = map[string]struct{}{}
			}
			h.doneDuring[id] = struct{}{}
		}
	}
}

// clear forgets every entry held: all were handed back (Release).
func (h *handouts) clear() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.held = nil
}

// noteLost notes that a read failed, or that entries may be left to
// recover (lost true), or not (false).
func (h *handouts) noteLost(lost bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.lost = lost
}

// mayHaveLost reports whether a read failed since the last recovery that
// found nothing left.
func (h *handouts) mayHaveLost() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lost
}
