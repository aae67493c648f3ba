package freq

import (
	"crypto/sha256"
	"encoding/hex"
)

// keys returns the script's KEYS for identity: the list, the total and,
// when dedupe is not empty, the dedupe key. All share the hash tag
// {<hex of the first 16 bytes of SHA-256(identity)>}, so they live in one
// cluster slot, and no identity (of any length or content) can produce
// another's keys. A dedupe key longer than MaxDedupeKey is replaced by
// its SHA-256 in hex under "#", a form no shorter key takes by accident.
func (s *Store) keys(identity, dedupe string) []string {
	sum := sha256.Sum256([]byte(identity))
	base := s.prefix + "{" + hex.EncodeToString(sum[:16]) + "}:"
	if dedupe == "" {
		return []string{base + "l", base + "n"}
	}
	if len(dedupe) > MaxDedupeKey {
		long := sha256.Sum256([]byte(dedupe))
		dedupe = "#" + hex.EncodeToString(long[:])
	}
	return []string{base + "l", base + "n", base + "e:" + dedupe}
}
