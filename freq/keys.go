package freq

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"

	"github.com/vkcounter/vkcounter/internal/redisconn"
)

// Key layout of a Store (see text.lua for what each key holds):
//
//	prefix + "f:{" + tag + "}" + 9 bytes    the text's key
//	prefix + "f:{" + tag + "}e0" and "}e1"  the slot's dedupe hashes
//
// The 9 bytes are bytes 16 to 24 of SHA-256(identity), binary. tag is the
// three characters of slotTags that Redis Cluster hashes into the slot of
// the former layout's keys (prefix + "f:{" + hex of the first 16 bytes of
// SHA-256(identity) + "}" + ...), so that a text's former keys can be
// converted in the same single-slot script. A text is thus named by 86 bits
// (14 of the slot, 72 of the bytes): two of n texts alive in one window
// share a key with probability about n²/2^87, 1 in 10^10 for 10^8 texts.
const textHashBytes = 9

// dedupeHashBytes is the length of a message's hash (of its identity and
// dedupe key): two messages of one text, or two in one slot's bucket, are
// taken for one with probability 2^-56 per pair.
const dedupeHashBytes = 7

// maxExtraKeys is the most keys a caller of CountWith adds to the count's.
const maxExtraKeys = 4

// textKeys are the KEYS and the message's hash of one count. The script's
// arguments point into it (go-redis writes a *string as its value), so a
// count allocates its key strings (one allocation) and this struct only.
type textKeys struct {
	// names are text, even bucket, odd bucket, former list, former
	// total[, former dedupe key], then room for the keys of CountWith's
	// caller.
	names [6 + maxExtraKeys]string
	n     int    // how many names keys filled
	hash  string // dedupeHashBytes bytes, or "" without a dedupe key
}

// scratch holds the buffers keys hashes and builds names in.
var scratch = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// keys returns the script's KEYS for identity and dedupe (see textKeys).
// The names are substrings of one string.
func (s *Store) keys(identity, dedupe string) *textKeys {
	bp := scratch.Get().(*[]byte)
	defer scratch.Put(bp)
	sum := sha256.Sum256(append((*bp)[:0], identity...))
	var hexTag [32]byte
	hex.Encode(hexTag[:], sum[:16])
	tag := slotTag(redisconn.TagSlot(hexTag[:]))
	n := 5
	if dedupe != "" {
		n = 6
	}
	// The names, one after another, then the message's hash.
	b := (*bp)[:0]
	var ends [6]int
	text := func() { b = append(append(append(append(b, s.prefix...), '{'), tag...), '}') }
	former := func() { b = append(append(append(append(b, s.prefix...), '{'), hexTag[:]...), "}:"...) }
	text()
	b = append(b, sum[16:16+textHashBytes]...)
	ends[0] = len(b)
	text()
	b = append(b, "e0"...)
	ends[1] = len(b)
	text()
	b = append(b, "e1"...)
	ends[2] = len(b)
	former()
	b = append(b, 'l')
	ends[3] = len(b)
	former()
	b = append(b, 'n')
	ends[4] = len(b)
	if dedupe != "" {
		former()
		b = append(append(b, "e:"...), KeyPart(dedupe)...)
		ends[5] = len(b)
		// The message's hash: of the identity's digest and the dedupe key.
		h := sha256.Sum256(append(append(b[len(b):], sum[:]...), dedupe...))
		b = append(b, h[:dedupeHashBytes]...)
	}
	*bp = b
	all := string(b)
	k := &textKeys{n: n}
	start := 0
	for i := range n {
		k.names[i] = all[start:ends[i]]
		start = ends[i]
	}
	if dedupe != "" {
		k.hash = all[start:]
	}
	return k
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

// slots is the number of Redis Cluster hash slots.
const slots = 16384

// tagAlphabet is what slot tags are made of: no brace, no separator.
const tagAlphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

var (
	tagsOnce sync.Once
	tags     [slots]string
)

// slotTag returns the first three-character string of tagAlphabet (in
// alphabet order) that Redis Cluster hashes into slot n. The table is built
// on first use (238,328 CRCs, about a millisecond).
func slotTag(n int) string {
	tagsOnce.Do(func() {
		found := 0
		var b [3]byte
		for _, x := range []byte(tagAlphabet) {
			for _, y := range []byte(tagAlphabet) {
				for _, z := range []byte(tagAlphabet) {
					b = [3]byte{x, y, z}
					if s := redisconn.TagSlot(b[:]); tags[s] == "" {
						tags[s] = string(b[:])
						found++
					}
				}
			}
		}
		if found != slots {
			panic(fmt.Sprintf("freq: only %d of %d slots have a tag", found, slots))
		}
	})
	return tags[n]
}

// checkPrefix refuses a prefix with a brace: it would change the hash tag
// of the keys, which must share one per text.
func checkPrefix(prefix string) error {
	if strings.ContainsAny(prefix, "{}") {
		return fmt.Errorf("%w: key prefix %q has a brace, which would change the keys' Redis Cluster hash tags", ErrInvalid, prefix)
	}
	return nil
}
