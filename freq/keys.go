package freq

import (
	"crypto/sha256"
	"encoding/hex"
)

// keys returns the script's KEYS for identity: the list, the total and,
// when eventID is not empty, the event key. All share the hash tag
// {<hex of the first 16 bytes of SHA-256(identity)>}, so they live in one
// cluster slot, and no identity (of any length or content) can produce
// another's keys.
func (s *Store) keys(identity, eventID string) []string {
	sum := sha256.Sum256([]byte(identity))
	base := s.prefix + "{" + hex.EncodeToString(sum[:16]) + "}:"
	if eventID == "" {
		return []string{base + "l", base + "n"}
	}
	return []string{base + "l", base + "n", base + "e:" + eventID}
}
