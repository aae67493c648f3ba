package freq

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/vkcounter/vkcounter/internal/redisconn"
)

// Key layout of a Store (see text.lua for what each key holds):
//
//	prefix + "f:{" + tag + "}" + 9 bytes    the text's key (a list)
//	prefix + "f:{" + tag + "}b" [+ n]       the text's bucket (a hash)
//	prefix + "f:{" + tag + "}e0" and "}e1"  the slot's dedupe hashes
//	prefix + "f:layout"                     the layout's version (Load)
//
// The text's bucket is the first k bits of SHA-256(identity), k the
// Store's bucket bits (Options.BucketBits); tag is slotTag of the slot
// those bits spread over the 16,384 slots (b << (14-k) for k ≤ 14; for a
// larger k the first 14 bits, the other k-14 written after the "b" in
// decimal), so a text's bucket, its key and its slot's dedupe hashes share
// one slot. The 9 bytes are bytes 16 to 24 of the digest, binary: the
// text's field in its bucket and the end of its key's name. A text is
// thus named by k + 72 bits: two of n texts alive in one window share a
// name with probability about n²/2^(k+73), 1 in 2·10^9 for 10^8 texts at
// the default k of 11.
const textHashBytes = 9

// Bucket bits: how many buckets (2^k) hold the texts seen once.
const (
	// DefaultBucketBits is the k used when Options.BucketBits is zero:
	// 2,048 buckets, about 10 texts each at 20,000 texts a day and 50 at
	// 100,000, each a small hash Redis keeps as a listpack up to its
	// hash-max-listpack-entries (512 by default). From about 900,000 texts
	// in the window on, buckets fill past it: Redis then keeps a bucket as
	// a hash table, about 60-70 bytes a text, still under a key of its own
	// (BENCHMARKS.md, "Texts in buckets").
	DefaultBucketBits = 11
	// MaxBucketBits is the largest k: a million buckets.
	MaxBucketBits = 20
	// slotBits is the number of bits of a Redis Cluster slot.
	slotBits = 14
)

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
	names [4]string // the text, the even dedupe hash, the odd one, the bucket
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
	bucket := binary.BigEndian.Uint32(sum[:4]) >> (32 - s.bucketBits)
	slot, rest := int(bucket)<<max(slotBits-s.bucketBits, 0), -1
	if s.bucketBits > slotBits {
		slot, rest = int(bucket>>(s.bucketBits-slotBits)), int(bucket&(1<<(s.bucketBits-slotBits)-1))
	}
	tag := slotTag(slot)
	// The names, one after another, then the message's hash.
	b := (*bp)[:0]
	var ends [4]int
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
	text()
	b = append(b, 'b')
	if rest >= 0 {
		b = strconv.AppendInt(b, int64(rest), 10)
	}
	ends[3] = len(b)
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
