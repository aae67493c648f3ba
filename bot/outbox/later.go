package outbox

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// A reply whose send failed for now is set aside until its due time
// (Later): out of the stream, into the community's later set (a sorted
// set, KEYS_PREFIX + "o:{group}:later", scored by due time), the entry
// with its retry state as the member. So its retry state lives with it in
// Redis and survives a restart or a takeover; the stream's head is not
// pinned by it, however long it waits; and the sender goes on with other
// replies. Take hands out the replies come due (due.lua) before new ones,
// each made due again ClaimAfter later while it is sent, so that a sender
// that dies with it leaves it to another. Done removes them for good.
//
// A reply of a peer under flood control is also listed in that peer's
// list (flood list): at most Options.FloodKeep of a peer's replies are
// kept, the oldest dropped beyond it.

// parkedPrefix begins the ID of an entry handed out from the later set:
// its member there, where a stream id begins with a digit.
const parkedPrefix = "p"

// DefaultFloodKeep is the default of Options.FloodKeep.
const DefaultFloodKeep = 100

// floodListTTL is how long a flooded peer's list lives after its last
// change: longer than flood control's longest pause.
const floodListTTL = 2 * time.Hour

// Parked reports whether e was handed out from the later set (see Later).
func (e Entry) Parked() bool { return isParked(e.ID) }

func isParked(id string) bool { return strings.HasPrefix(id, parkedPrefix) }

// parked is an entry's member in the later set: its fields and retry
// state, in JSON after parkedPrefix.
type parked struct {
	Origin    string `json:"i"` // the stream id it was first stored under: members stay distinct
	GroupID   int    `json:"g"`
	PeerID    int    `json:"p"`
	Message   string `json:"m"`
	RandomID  int32  `json:"r"`
	Queued    int64  `json:"q"`
	QuoteCMID int    `json:"c,omitempty"`
	ReplyTo   int    `json:"t,omitempty"`
	Tries     int    `json:"n,omitempty"`
	Unknown   int    `json:"u,omitempty"`
	Flood     int    `json:"f,omitempty"`
}

// member returns e's member in the later set.
func member(e Entry) string {
	origin := e.origin
	if origin == "" {
		origin = e.ID
	}
	b, _ := json.Marshal(parked{Origin: origin, GroupID: e.GroupID, PeerID: e.PeerID, Message: e.Message,
		RandomID: e.RandomID, Queued: e.Queued.UnixMilli(), QuoteCMID: e.QuoteCMID, ReplyTo: e.ReplyTo,
		Tries: e.Tries, Unknown: e.Unknown, Flood: e.Flood}) // plain fields: cannot fail
	return parkedPrefix + string(b)
}

// decodeParked reads an entry back from its member.
func decodeParked(m string) (Entry, error) {
	var p parked
	if err := json.Unmarshal([]byte(strings.TrimPrefix(m, parkedPrefix)), &p); err != nil {
		return Entry{}, fmt.Errorf("outbox: set-aside reply %.40q: %w", m, err)
	}
	if p.Message == "" {
		return Entry{}, fmt.Errorf("outbox: set-aside reply %.40q: empty message", m)
	}
	return Entry{ID: m, origin: p.Origin, GroupID: p.GroupID, PeerID: p.PeerID, Message: p.Message, RandomID: p.RandomID,
		Queued: time.UnixMilli(p.Queued), QuoteCMID: p.QuoteCMID, ReplyTo: p.ReplyTo,
		Tries: p.Tries, Unknown: p.Unknown, Flood: p.Flood}, nil
}

// laterKey is the community's later set, laterAgeKey the same members
// scored by when each was stored (the outbox's oldest reply is read from
// it); floodKey a flooded peer's list.
func (c *community) laterKey() string         { return c.key + ":later" }
func (c *community) laterAgeKey() string      { return c.key + ":later:age" }
func (c *community) floodKey(peer int) string { return c.key + ":fl:" + strconv.Itoa(peer) }

// Later sets replies of group aside, each until its Due, with its retry
// state (Tries, Unknown, Flood): they leave the stream (or their former
// place in the later set) and Take hands them out again once due, to
// whichever sender of whichever instance asks first. A reply with Flood
// set is listed under its peer; past Options.FloodKeep of them, the
// oldest are dropped, and returned. Repeating a call changes nothing more.
func (o *Outbox) Later(ctx context.Context, group int, replies ...Entry) (dropped []Entry, err error) {
	if len(replies) == 0 {
		return nil, nil
	}
	c := o.community(group)
	keys := []string{c.key, c.laterKey(), c.laterAgeKey()}
	lists := map[int]int{} // peer → index in keys
	args := make([]any, 0, 3+6*len(replies))
	args = append(args, ConsumerGroup, o.opts.FloodKeep, floodListTTL.Milliseconds())
	var acked, forgot []string
	for _, e := range replies {
		id, old := e.ID, ""
		if e.Parked() {
			id, old = "", e.ID
			forgot = append(forgot, old)
		} else {
			acked = append(acked, id)
		}
		list := 0
		if e.Flood > 0 {
			if list = lists[e.PeerID]; list == 0 {
				keys = append(keys, c.floodKey(e.PeerID))
				list = len(keys)
				lists[e.PeerID] = list
			}
		}
		args = append(args, id, old, member(e), e.Due.UnixMilli(), list, e.Queued.UnixMilli())
	}
	look := c.laterLook()
	v, err := laterScript.Run(ctx, o.rdb, keys, args...).StringSlice()
	c.handouts.finished(acked, err == nil)
	if err != nil {
		return nil, fmt.Errorf("outbox: set aside: %w", err)
	}
	c.letGoParked(forgot)
	c.noteMine(replies, forgot)
	if err := o.noteDue(c, v, look); err != nil {
		return nil, fmt.Errorf("outbox: set aside: %w", err)
	}
	for _, m := range v[1:] {
		e, err := decodeParked(m)
		if err != nil {
			o.log.Error().Err(err).Msg("outbox: undecodable set-aside reply dropped")
			continue
		}
		dropped = append(dropped, e)
	}
	return dropped, nil
}

// takeDue hands out up to n replies of group come due in the later set,
// when one may be: the earliest due time last read has come, or
// LaterIdle passed since a look found the set empty (another instance may
// have set one aside) — unless a takeover starts in this Take, whose call
// reads the earliest due time anyway (reclaim): the next Take hands out
// what it finds due.
func (o *Outbox) takeDue(ctx context.Context, c *community, n int) ([]Entry, error) {
	now := o.opts.Clock()
	c.mu.Lock()
	due := !now.Before(c.laterDue) && !(c.laterEmpty && c.takeoverDue(now, o.opts.ClaimAfter))
	if due {
		c.laterDue = now.Add(o.opts.ClaimAfter) // until the answer says sooner
	}
	look := c.laterLooks
	c.mu.Unlock()
	if !due {
		return nil, nil
	}
	v, err := dueScript.Run(ctx, o.rdb, []string{c.laterKey()}, now.UnixMilli(), n, now.Add(o.opts.ClaimAfter).UnixMilli()).StringSlice()
	if err == nil {
		err = o.noteDue(c, v, look)
	}
	if err != nil {
		c.mu.Lock()
		c.laterDue = time.Time{} // look again next time
		c.mu.Unlock()
		return nil, fmt.Errorf("outbox: take the replies set aside: %w", err)
	}
	out := make([]Entry, 0, len(v)-1)
	var bad []string
	for _, m := range v[1:] {
		e, err := decodeParked(m)
		if err != nil {
			o.log.Error().Err(err).Msg("outbox: undecodable set-aside reply dropped")
			bad = append(bad, m)
			continue
		}
		out = append(out, e)
	}
	c.holdParked(out)
	if len(bad) > 0 {
		o.forget(ctx, c, bad)
	}
	return out, nil
}

// laterLook returns what noteDue is to be given for a reading of the
// later set asked now.
func (c *community) laterLook() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.laterLooks
}

// noteDue reads the earliest due time of a later script's reply v into
// c: the next time a Take looks at the later set. look is what laterLook
// gave before the script was sent. Readings run concurrently (the senders
// of a community share c), and their answers may come back in another
// order than Redis ran them: one noted since this one was asked may be the
// newer, so this one then only brings the next look sooner. Otherwise an
// empty set read just before a reply was set aside, noted just after it,
// would leave that reply unlooked at for LaterIdle.
func (o *Outbox) noteDue(c *community, v []string, look uint64) error {
	if len(v) == 0 {
		return fmt.Errorf("empty reply")
	}
	next, empty := o.opts.Clock().Add(o.opts.LaterIdle), v[0] == "-1"
	if !empty {
		ms, err := strconv.ParseFloat(v[0], 64)
		if err != nil {
			return fmt.Errorf("due time %q", v[0])
		}
		next = time.UnixMilli(int64(ms))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if look != c.laterLooks {
		if c.laterDue.Before(next) {
			next = c.laterDue
		}
		empty = empty && c.laterEmpty
	}
	c.laterLooks++
	c.laterDue, c.laterEmpty = next, empty
	return nil
}

// laterWait returns how long a Take of c may wait for new replies, wait
// at most: not past the earliest due time of the later set, as of now.
func (c *community) laterWait(wait time.Duration, now time.Time) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.laterDue.IsZero() {
		return wait
	}
	return max(min(wait, c.laterDue.Sub(now)), time.Millisecond)
}

// forget removes finished replies from the later set and their peers' lists.
func (o *Outbox) forget(ctx context.Context, c *community, members []string) error {
	keys := []string{c.laterKey(), c.laterAgeKey()}
	lists := map[int]int{}
	args := make([]any, 0, 2*len(members))
	for _, m := range members {
		list := 0
		if e, err := decodeParked(m); err == nil && e.Flood > 0 {
			if list = lists[e.PeerID]; list == 0 {
				keys = append(keys, c.floodKey(e.PeerID))
				list = len(keys)
				lists[e.PeerID] = list
			}
		}
		args = append(args, m, list)
	}
	look := c.laterLook()
	v, err := forgetScript.Run(ctx, o.rdb, keys, args...).Text()
	if err != nil {
		return fmt.Errorf("outbox: done with set-aside replies: %w", err)
	}
	c.letGoParked(members)
	c.noteMine(nil, members)
	return o.noteDue(c, []string{v}, look)
}

// holdParked notes the replies handed out from the later set, for
// Release to hand back; letGoParked forgets them.
func (c *community) holdParked(es []Entry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range es {
		if c.parkedHeld == nil {
			c.parkedHeld = map[string]struct{}{}
		}
		c.parkedHeld[e.ID] = struct{}{}
	}
}

func (c *community) letGoParked(members []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range members {
		delete(c.parkedHeld, m)
	}
}

// releaseParked makes due at once the replies this instance took from
// the later set and did not finish, and those it set aside that come due
// within drainLater, for another instance to send now.
func (o *Outbox) releaseParked(ctx context.Context, c *community) (int, error) {
	c.mu.Lock()
	held := make([]string, 0, len(c.parkedHeld))
	for m := range c.parkedHeld {
		held = append(held, m)
	}
	c.mu.Unlock()
	members := held
	soon, err := o.mineSoon(ctx, c)
	if err != nil {
		return 0, fmt.Errorf("outbox: hand back set-aside replies: %w", err)
	}
	members = append(members, soon...)
	if len(members) == 0 {
		return 0, nil
	}
	now := float64(o.opts.Clock().UnixMilli())
	zs := make([]redis.Z, len(members))
	for i, m := range members {
		zs[i] = redis.Z{Score: now, Member: m}
	}
	if err := o.rdb.ZAddXX(ctx, c.laterKey(), zs...).Err(); err != nil {
		return 0, fmt.Errorf("outbox: hand back set-aside replies: %w", err)
	}
	c.letGoParked(held)
	c.noteMine(nil, members)
	return len(members), nil
}

// noteMine notes the replies this instance set aside (their new members),
// and forgets the members gone (finished, or set aside anew).
func (c *community) noteMine(set []Entry, gone []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range gone {
		delete(c.mine, m)
	}
	for _, e := range set {
		if c.mine == nil {
			c.mine = map[string]struct{}{}
		}
		c.mine[member(e)] = struct{}{}
	}
}

// drainLater is how soon a reply this instance set aside must come due
// for its drain to wait for it: a retry's backoff, not flood control's
// pause or a halted token's (those are left to the other instances, or
// the next start).
const drainLater = 5 * time.Second

// mineDueSoon reports whether the later set still holds a reply this
// instance set aside that comes due within drainLater.
func (o *Outbox) mineDueSoon(ctx context.Context, c *community) (bool, error) {
	soon, err := o.mineSoon(ctx, c)
	return len(soon) > 0, err
}

// mineSoon returns the replies this instance set aside that the later
// set still holds and that come due within drainLater; the ones gone
// (sent, or set aside anew, by any instance) it forgets.
func (o *Outbox) mineSoon(ctx context.Context, c *community) ([]string, error) {
	c.mu.Lock()
	members := make([]string, 0, len(c.mine))
	for m := range c.mine {
		members = append(members, m)
	}
	c.mu.Unlock()
	if len(members) == 0 {
		return nil, nil
	}
	scores, err := o.rdb.ZMScore(ctx, c.laterKey(), members...).Result()
	if err != nil {
		return nil, fmt.Errorf("outbox: read the replies set aside: %w", err)
	}
	horizon := float64(o.opts.Clock().Add(drainLater).UnixMilli())
	var gone, soon []string
	for i, sc := range scores {
		switch {
		case sc == 0:
			gone = append(gone, members[i]) // ZMSCORE answers nil (0 here) for a member not in the set
		case sc <= horizon:
			soon = append(soon, members[i])
		}
	}
	c.noteMine(nil, gone)
	return soon, nil
}
