package filestore

// LockerPaths returns how many lock files l tracks: those some goroutine
// holds or waits for.
func LockerPaths(l *Locker) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.paths)
}
