package outbox

// ReadUnderWay notes a read of group under way, as Take does around its
// reads, until end is called.
func (o *Outbox) ReadUnderWay(group int) (end func()) {
	_, end = o.community(group).handouts.beginRead()
	return end
}

// Waiting is how many reads that wait (Take with a wait) are under way:
// the connections of their own they hold.
func (o *Outbox) Waiting() int {
	b := &o.blockers
	b.mu.Lock()
	defer b.mu.Unlock()
	n := len(b.live)
	for _, free := range b.idle {
		n -= len(free)
	}
	return n
}

// WatchRounds is how many rounds the watch of the figures (watchStats)
// made: one per tick of its ticker.
func (o *Outbox) WatchRounds() int64 { return o.watch.rounds.Load() }
