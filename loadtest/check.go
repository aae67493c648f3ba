package loadtest

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/vkcounter/vkcounter/vktest"
)

// check attributes every send to the event it answers (see attributor)
// and counts what is wrong into c; the delay from posting each event to
// its first reply goes to reply.
func (r *callbackRun) check(sends []vktest.Send, c *Check, reply *series) {
	var sent []*event
	for _, e := range r.events {
		if e.state != notSent {
			sent = append(sent, e)
		}
	}
	who := newAttributor(r.events)
	misrouted := map[*event]bool{}
	for _, s := range sends {
		switch e, wrongPeer := who.of(s); {
		case e == nil || e.state == notSent:
			c.add(Problem{Kind: Unexpected, Subject: fmt.Sprintf("reply %q to peer %d with random_id %d", s.Message, s.PeerID, s.RandomID)})
		case wrongPeer:
			misrouted[e] = true
			c.add(Problem{Kind: WrongPeer, Subject: e.subject(), Want: "peer " + strconv.Itoa(e.peer), Got: fmt.Sprintf("peer %d (%q)", s.PeerID, s.Message)})
		default:
			e.sends = append(e.sends, s)
		}
	}

	numbers := map[*event]int64{} // the number each answered event got
	for _, e := range sent {
		if e.state == failed {
			c.add(Problem{Kind: NotCounted, Subject: e.subject(), Want: `"ok"`, Got: "no ok in " + plural(r.o.MaxAttempts, "attempt", "attempts")})
		}
		if len(e.sends) == 0 {
			if e.state == counted && !misrouted[e] {
				c.add(Problem{Kind: Missing, Subject: e.subject(), Want: fmt.Sprintf("a reply to peer %d", e.peer), Got: "none"})
			}
			continue
		}
		c.Checked++
		first := e.sends[0]
		reply.record(e.start, first.At.Sub(e.start))
		c.Resent += int64(r.checkDeliveries(e, c, r.o.StrictSends || len(r.o.Faults) > 0))
		n, err := strconv.ParseInt(first.Message, 10, 64)
		if err != nil {
			c.add(Problem{Kind: WrongNumber, Subject: e.subject(), Want: "a number", Got: strconv.Quote(first.Message)})
			continue
		}
		numbers[e] = n
	}

	byText := make([][]*event, len(r.texts))
	for _, e := range sent {
		byText[e.text] = append(byText[e.text], e)
	}
	for _, events := range byText {
		checkText(events, numbers, c, r.o.LongPoll)
	}
}

// checkDeliveries checks the sends attributed to e: one delivered (none:
// VK answered every one with an earlier message's id, the reply was
// swallowed; several: a duplicate delivery), one number per random_id, and
// when strict, one send. It returns how many sends repeated one of e's
// earlier random_ids, which VK drops.
func (r *callbackRun) checkDeliveries(e *event, c *Check, strict bool) (resent int) {
	var delivered []vktest.Send
	message := map[int64]string{}
	for _, s := range e.sends {
		if s.Delivered {
			delivered = append(delivered, s)
		}
		m, seen := message[s.RandomID]
		switch {
		case !seen:
			message[s.RandomID] = s.Message
		case m != s.Message:
			resent++
			c.add(Problem{Kind: WrongNumber, Subject: e.subject(), Want: fmt.Sprintf("%q again for random_id %d", m, s.RandomID), Got: strconv.Quote(s.Message)})
		default:
			resent++
		}
	}
	switch {
	case len(delivered) == 0:
		s := e.sends[0]
		c.add(Problem{Kind: Swallowed, Subject: e.subject(), Want: "a message delivered", Got: fmt.Sprintf("%q with random_id %d answered with the earlier message %d", s.Message, s.RandomID, s.MessageID)})
	case len(delivered) > 1:
		got := make([]string, len(delivered))
		for i, s := range delivered {
			got[i] = fmt.Sprintf("%q (random_id %d)", s.Message, s.RandomID)
		}
		c.add(Problem{Kind: Duplicate, Subject: e.subject(), Want: "one delivery", Got: fmt.Sprintf("%d: %s", len(delivered), strings.Join(got, ", "))})
	}
	if strict && resent > 0 {
		c.add(Problem{Kind: RepeatedSend, Subject: e.subject(), Want: "one messages.send", Got: strconv.Itoa(len(e.sends))})
	}
	return resent
}

// checkText checks the numbers the events of one text got. Counted in
// Redis one after another, they must be 0 … n−1, each once. When each event
// was answered "ok" before the next was posted, or when they were handled
// in the order posted (ordered: a long poll), the order is known too:
// the k-th event must get k. Events not answered "ok" may or may not have
// been counted, so with them only the range and uniqueness are checked.
func checkText(events []*event, numbers map[*event]int64, c *Check, ordered bool) {
	slices.SortFunc(events, func(a, b *event) int {
		return cmp.Or(a.start.Compare(b.start), cmp.Compare(a.seq, b.seq))
	})
	sequential := true
	for i, e := range events {
		if e.state != counted {
			sequential = false
		} else if i > 0 && events[i-1].acked.After(e.start) && !ordered {
			sequential = false
		}
	}
	if sequential {
		for k, e := range events {
			if n, ok := numbers[e]; ok && n != int64(k) {
				c.add(Problem{Kind: WrongNumber, Subject: e.subject(), Want: strconv.Itoa(k), Got: strconv.FormatInt(n, 10)})
			}
		}
		return
	}
	answered := slices.Clone(events)
	slices.SortStableFunc(answered, func(a, b *event) int { return cmp.Compare(firstAt(a), firstAt(b)) })
	limit := int64(len(events))
	taken := map[int64]bool{}
	for _, e := range answered {
		n, ok := numbers[e]
		if !ok {
			continue
		}
		if n < 0 || n >= limit || taken[n] {
			c.add(Problem{Kind: WrongNumber, Subject: e.subject(), Want: fmt.Sprintf("each of 0…%d once", limit-1), Got: strconv.FormatInt(n, 10)})
			continue
		}
		taken[n] = true
	}
}

// firstAt is when e's first reply arrived, in nanoseconds, or the largest
// time for an event without one.
func firstAt(e *event) int64 {
	if len(e.sends) == 0 {
		return 1<<63 - 1
	}
	return e.sends[0].At.UnixNano()
}

func (e *event) subject() string {
	return fmt.Sprintf("event %s (text %d, peer %d)", e.id, e.text, e.peer)
}
