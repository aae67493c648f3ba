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
//	prefix + "f:layout"                     the layout's version (Load)
//
// The 9 bytes are bytes 16 to 24 of SHA-256(identity), binary; tag is the
// first three characters of slotTags that Redis Cluster hashes into the
// slot of the first 16 bytes of that digest in hex, so texts spread over
// every slot. A text is thus named by 86 bits (14 of the slot, 72 of the
// bytes): two of n texts alive in one window share a key with probability
// about n²/2^87, 1 in 10^10 for 10^8 texts.
const textHashBytes = 9

// recordBytes is the length of a message's record field: bytes of the
// SHA-256 of its dedupe key (in a community's state hash, reply.lua) or of
// its text's digest and its dedupe key (in a slot's dedupe hash,
// count.lua). A new message is taken for one recorded in the same one or
// two periods (an hour or two) with probability n/2^64 for n messages
// recorded there: at the fleet's most, 500 replies a second per token, 3.6
// million in two hours, 2·10^-13 per message, one in 300 years of
// messages at that pace. 8 bytes cost what 7 to 14 cost (Redis keeps a
// hash's field in a 16-byte allocation from 7 bytes on), and 6 or fewer
// (an 8-byte one) would take one message in 10^8 for another at that pace.
const recordBytes = 8

// textKeys are the KEYS and the message's hash of one count. The script's
// arguments point into it (go-redis writes a *string as its value), so a
// count allocates its key strings (one allocation) and this struct only.
type textKeys struct {
	names [3]string // the text, the even dedupe hash, the odd one
	hash  string    // recordBytes bytes, or "" without a dedupe key
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
	// The names, one after another, then the message's hash.
	b := (*bp)[:0]
	var ends [3]int
	text := func() { b = append(append(append(append(b, s.prefix...), '{'), tag...), '}') }
	text()
	b = append(b, sum[16:16+textHashBytes]...)
	ends[0] = len(b)
	text()
	b = append(b, "e0"...)
	ends[1] = len(b)
	text()
	b = append(b, "e1"...)
	ends[2] = len(b)
	if dedupe != "" {
		// The message's hash: of the identity's digest and the dedupe key.
		h := sha256.Sum256(append(append(b[len(b):], sum[:]...), dedupe...))
		b = append(b, h[:recordBytes]...)
	}
	*bp = b
	all := string(b)
	k := &textKeys{}
	start := 0
	for i := range k.names {
		k.names[i] = all[start:ends[i]]
		start = ends[i]
	}
	k.hash = all[start:]
	return k
}

// recordField returns the field of the message of dedupe key dedupe in its
// community's state hash (reply.lua): recordBytes bytes of its SHA-256, or
// "" for no key.
func recordField(dedupe string) string {
	if dedupe == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(dedupe))
	return string(sum[:recordBytes])
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
