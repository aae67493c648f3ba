package toptexts

// Kept is how many keys t holds, observed within the window or not.
func (t *Table) Kept() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.byDigest) != len(t.heap) {
		panic("index and heap differ")
	}
	return len(t.heap)
}
