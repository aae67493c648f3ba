package bot

import "time"

// maxGates bounds how many peers a worker keeps a gate for: past it,
// expired gates are forgotten, and while it is still full no new peer is
// gated (its replies are then each set aside on their own).
const maxGates = 10000

// A peerGate holds a peer's replies back while VK refuses that peer: one
// reply (the probe) goes when the gate opens, the others wait for its
// answer.
type peerGate struct {
	until time.Time // no reply to the peer is sent before it
	flood int       // flood control's level: the number of refusals in a row with 9
}

// peerGates are one worker's gates; not safe for concurrent use (the
// worker's goroutine owns them).
type peerGates map[int]peerGate

// closed tells whether replies to peer must wait, and until when.
func (g peerGates) closed(peer int, now time.Time) (time.Time, bool) {
	p, ok := g[peer]
	if !ok || !now.Before(p.until) {
		return time.Time{}, false
	}
	return p.until, true
}

// gated tells whether peer has a gate, open or not: its next reply is a probe.
func (g peerGates) gated(peer int) bool {
	_, ok := g[peer]
	return ok
}

// close gates peer until until, keeping the flood level.
func (g peerGates) close(peer int, until time.Time, flood int, now time.Time) {
	if _, ok := g[peer]; !ok && len(g) >= maxGates {
		for p, gate := range g {
			if !now.Before(gate.until) {
				delete(g, p)
			}
		}
		if len(g) >= maxGates {
			return
		}
	}
	g[peer] = peerGate{until: until, flood: flood}
}

// open removes peer's gate: VK accepted a reply to it.
func (g peerGates) open(peer int) { delete(g, peer) }

// floodLevel is the peer's flood-control level (0: none).
func (g peerGates) floodLevel(peer int) int { return g[peer].flood }
