package freq

import (
	"crypto/sha256"
	"encoding/hex"
)

// keys returns the script's KEYS for identity: the list, the total and,
// when dedupe is not empty, the dedupe key. All share the hash tag
// {<hex of the first 16 bytes of SHA-256(identity)>}, so they live in one
// cluster slot, and no identity (of any length or content) can produce
// another's keys. The dedupe key is written as KeyPart gives it.
func (s *Store) keys(identity, dedupe string) []string {
	sum := sha256.Sum256([]byte(identity))
	base := s.prefix + "{" + hex.EncodeToString(sum[:16]) + "}:"
	if dedupe == "" {
		return []string{base + "l", base + "n"}
	}
	return []string{base + "l", base + "n", base + "e:" + KeyPart(dedupe)}
}

// KeyPart returns s as it is written into a Redis key name: s itself when
// it is at most MaxDedupeKey bytes, else "#" and its SHA-256 in hex, a form
// no shorter s takes by accident. So a name built from a client's string
// (an event_id of any length) stays short, and the keys of short strings,
// the usual ones, read as they always did.
func KeyPart(s string) string {
	if len(s) <= MaxDedupeKey {
		return s
	}
	sum := sha256.Sum256([]byte(s))
	return "#" + hex.EncodeToString(sum[:])
}
