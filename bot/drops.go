package bot

import (
	"sync"
	"time"
)

// lastDrops is how many dropped replies LastDrops remembers.
const lastDrops = 5

// A DroppedReply is a reply VK refused for good: when, to whom, and VK's answer.
type DroppedReply struct {
	At      time.Time `json:"at"`
	GroupID int       `json:"group_id"`
	PeerID  int       `json:"peer_id"`
	Error   string    `json:"error"`
}

// dropLog keeps the last lastDrops drops, in a fixed ring.
type dropLog struct {
	mu   sync.Mutex
	ring [lastDrops]DroppedReply
	n    int // drops noted, ever
}

func (l *dropLog) note(d DroppedReply) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ring[l.n%lastDrops] = d
	l.n++
}

// LastDrops returns the last few replies dropped (at most 5), newest
// first: their reason, beside Stats.Dropped's count.
func (b *Bot) LastDrops() []DroppedReply {
	l := &b.drops
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]DroppedReply, 0, min(l.n, lastDrops))
	for i := l.n - 1; i >= 0 && i >= l.n-lastDrops; i-- {
		out = append(out, l.ring[i%lastDrops])
	}
	return out
}

// dropped counts a reply dropped for err and remembers why.
func (b *Bot) dropped(r Reply, err error) {
	b.stats.dropped.Add(1)
	d := DroppedReply{At: time.Now(), GroupID: r.GroupID, PeerID: r.PeerID}
	if err != nil {
		d.Error = err.Error()
	}
	b.drops.note(d)
}
