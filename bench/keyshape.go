package bench

import (
	"encoding/binary"
	"fmt"
	"strings"
)

// KeyShape is the form of the keys a benchmark writes and reads. Vigil's
// speed depends on it: its skiplist orders keys first by an abbreviation of
// their first 8 bytes, so keys that share those bytes (a common prefix)
// take full comparisons, and random keys (hashes) defeat any locality of
// inserts. db_bench has only its own shape; the others are kvbench's, so
// that the figures can be had for keys like users' too.
type KeyShape uint8

const (
	// KeyDBBench is db_bench's key (MakeKey): --key_size bytes, the low
	// min(--key_size, 8) bytes of the index big-endian, then ASCII '0'.
	KeyDBBench KeyShape = iota
	// KeyDecimal is the index as 16 zero-padded ASCII digits (%016d), as
	// LevelDB's db_bench and many ID schemes write keys.
	KeyDecimal
	// KeyPrefixed is a 12-byte prefix shared by every key (a table and
	// index ID, as SQL layers encode rows) and the index big-endian: 20
	// bytes whose first 8 never differ.
	KeyPrefixed
	// KeyHashed is 'h' and a 32-byte hash of the index, 33 bytes, in no
	// relation to the index's order: go-ethereum's hashed state keys.
	KeyHashed
	// KeyVarlen is "user:<index>:<field>", 10 to 40 bytes, the field one
	// of a fixed list of words, padded or cut to a length picked from a
	// hash of the index: document-store keys of varying length.
	KeyVarlen
	numKeyShapes
)

var keyShapeNames = [numKeyShapes]string{"dbbench", "decimal", "prefixed", "hashed", "varlen"}

// String returns the shape's name, as ParseKeyShape takes it.
func (s KeyShape) String() string {
	if s < numKeyShapes {
		return keyShapeNames[s]
	}
	return fmt.Sprintf("KeyShape(%d)", uint8(s))
}

// KeyShapeNames lists every shape's name, in the order of the constants,
// for flag help and error messages.
func KeyShapeNames() []string { return keyShapeNames[:] }

// ParseKeyShape returns the shape of a name (as String gives it); an
// unknown name is an error that lists the known ones.
func ParseKeyShape(name string) (KeyShape, error) {
	for i, n := range keyShapeNames {
		if n == name {
			return KeyShape(i), nil
		}
	}
	return 0, fmt.Errorf("unknown key shape %q (have %s)", name, strings.Join(keyShapeNames[:], ", "))
}

const (
	decimalWidth  = 16
	maxDecimalLen = 20 // digits of the largest uint64
	varlenMin     = 10
	varlenMax     = 40
)

// keyPrefix is KeyPrefixed's shared prefix: 12 bytes.
const keyPrefix = "/tbl/0053/1/"

// varlenFields are KeyVarlen's field names.
var varlenFields = [...]string{
	"id", "name", "email", "age", "address", "phone", "created", "updated",
	"profile", "settings", "avatar", "country", "last_login", "preferences",
	"followers", "session_token", "billing_address", "notifications",
}

// KeyLen returns the shortest and longest key of the shape, keySize being
// --key_size (used by KeyDBBench only). KeyDecimal's keys have 16 bytes
// up to index 10^16-1 and grow (as %016d does) beyond it; maxLen counts
// that.
func (s KeyShape) KeyLen(keySize int) (minLen, maxLen int) {
	switch s {
	case KeyDecimal:
		return decimalWidth, maxDecimalLen
	case KeyPrefixed:
		return len(keyPrefix) + 8, len(keyPrefix) + 8
	case KeyHashed:
		return 33, 33
	case KeyVarlen:
		return varlenMin, varlenMax
	}
	return keySize, keySize
}

// nominalLen is the key length kvbench's header reports and its size
// estimates use: the fixed length, or the middle of varlen's range.
func (s KeyShape) nominalLen(keySize int) int {
	lo, hi := s.KeyLen(keySize)
	if s == KeyDecimal {
		return lo
	}
	return (lo + hi) / 2
}

// KeyGen makes the keys of one shape into a buffer of its own, reused
// from key to key, so that generating a key never allocates: each key
// returned is valid until the next call. Every benchmark thread (and
// bench/peers' bigbatch) keeps one, so that all of them, and both engines
// of a comparison, get the very same keys.
type KeyGen struct {
	shape   KeyShape
	keySize int
	// prefixSize, keysPerPrefix and numKeys lay out KeyDBBench's keys as
	// db_bench's --prefix_size and --keys_per_prefix do (SetPrefixes).
	prefixSize    int
	keysPerPrefix int64
	numKeys       int64
	buf           []byte
}

// NewKeyGen returns a generator of shape's keys; keySize is --key_size
// (KeyDBBench's length; the other shapes have their own).
func NewKeyGen(shape KeyShape, keySize int) *KeyGen {
	_, maxLen := shape.KeyLen(keySize)
	// One byte more for Missing's suffix.
	return &KeyGen{shape: shape, keySize: keySize, buf: paddedBuf(maxLen, maxLen+1)}
}

// Shape returns the generator's shape.
func (g *KeyGen) Shape() KeyShape { return g.shape }

// SetPrefixes lays out KeyDBBench's keys as db_bench's GenerateKeyFromInt
// does under --prefix_size=prefixSize and --keys_per_prefix=keysPerPrefix
// when both are positive: the key of index v starts with prefixSize bytes
// naming prefix v mod (numKeys/keysPerPrefix) (its low min(prefixSize, 8)
// bytes big-endian, then '0's), so that about keysPerPrefix of numKeys
// keys share each prefix, and goes on as db_bench's key of v does in the
// bytes left (the low bytes of v big-endian, at most 8, then '0's).
// numKeys is the size of the key space, --num (the merge benchmarks pass
// their own to KeyIn). prefixSize is capped at the key size; the other
// shapes ignore it all.
func (g *KeyGen) SetPrefixes(prefixSize int, keysPerPrefix, numKeys int64) {
	g.prefixSize = min(max(prefixSize, 0), g.keySize)
	g.keysPerPrefix = max(keysPerPrefix, 0)
	g.numKeys = numKeys
}

// Key returns the key of index v (0..num-1): distinct indexes give
// distinct keys (KeyDBBench's only while v < 2^(8·keySize), as in
// db_bench, and without SetPrefixes).
func (g *KeyGen) Key(v uint64) []byte { return g.KeyIn(v, g.numKeys) }

// KeyIn returns the key of index v in a key space of numKeys keys: Key's,
// but with numKeys for SetPrefixes' (db_bench's merge benchmarks number
// their prefixes by --merge_keys).
func (g *KeyGen) KeyIn(v uint64, numKeys int64) []byte {
	b := g.buf[:cap(g.buf)]
	switch g.shape {
	case KeyDecimal:
		return b[:putDecimal(b, v, decimalWidth)]
	case KeyPrefixed:
		copy(b, keyPrefix)
		binary.BigEndian.PutUint64(b[len(keyPrefix):], v)
		return b[:len(keyPrefix)+8]
	case KeyHashed:
		b[0] = 'h'
		h := v
		for i := 0; i < 4; i++ {
			h = mix64(h)
			binary.BigEndian.PutUint64(b[1+8*i:], h)
		}
		return b[:33]
	case KeyVarlen:
		return b[:putVarlen(b, v)]
	}
	return g.dbBenchKey(b[:g.keySize], v, numKeys)
}

// dbBenchKey writes db_bench's key of index v into dst, all of it: the
// prefix SetPrefixes asks for, then MakeKey's layout in the bytes left.
func (g *KeyGen) dbBenchKey(dst []byte, v uint64, numKeys int64) []byte {
	pos := 0
	if g.keysPerPrefix > 0 && g.prefixSize > 0 {
		// db_bench divides by zero when keysPerPrefix exceeds numKeys; the
		// CLI refuses that, and here all keys then share prefix 0.
		prefix := v % uint64(max(numKeys/g.keysPerPrefix, 1))
		MakeKey(dst[:g.prefixSize], prefix)
		pos = g.prefixSize
	}
	MakeKey(dst[pos:], v)
	return dst
}

// Missing returns a key that no index has, made from v's. KeyDBBench's is
// db_bench's readmissing key: v's key laid out for --key_size+1 bytes (so
// one more '0', or, for keys whose index part is shorter than 8 bytes,
// one more byte of v), longer than any written. The other shapes append
// '.' to v's key (their keys have a fixed length or, varlen's, end in a
// letter or '_').
func (g *KeyGen) Missing(v uint64) []byte {
	if g.shape == KeyDBBench {
		return g.dbBenchKey(g.buf[:g.keySize+1], v, g.numKeys)
	}
	return append(g.Key(v), '.')
}

// mix64 is splitmix64's output function (Steele, Lea and Flood 2014) of
// state x: a bijection of the 64-bit integers that scatters its input's
// bits over all of its output's.
func mix64(x uint64) uint64 {
	z := x + 0x9e3779b97f4a7c15
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// putDecimal writes v in decimal, zero-padded to width digits (at least),
// at the start of dst and returns the length written.
func putDecimal(dst []byte, v uint64, width int) int {
	var tmp [maxDecimalLen]byte
	i := len(tmp)
	for {
		i--
		tmp[i] = byte('0' + v%10)
		v /= 10
		if v == 0 {
			break
		}
	}
	n := len(tmp) - i
	pad := max(width-n, 0)
	for j := 0; j < pad; j++ {
		dst[j] = '0'
	}
	copy(dst[pad:], tmp[i:])
	return pad + n
}

// putVarlen writes KeyVarlen's key of v at the start of dst (which has room
// for varlenMax bytes) and returns its length: "user:", v in decimal, ':'
// and a field name picked by a hash of v, then cut or padded ('_' and
// letters from the hash) to a total length the hash also picks in
// [varlenMin, varlenMax] (at least one field byte: the longest indexes
// leave less room for short keys).
func putVarlen(dst []byte, v uint64) int {
	h := mix64(v ^ 0x5bd1e9955bd1e995)
	n := copy(dst, "user:")
	n += putDecimal(dst[n:], v, 1)
	dst[n] = ':'
	n++
	target := max(varlenMin+int(h%(varlenMax-varlenMin+1)), n+1)
	word := varlenFields[(h>>8)%uint64(len(varlenFields))]
	n += copy(dst[n:target], word)
	if n < target {
		dst[n] = '_'
		n++
	}
	for p := h; n < target; n++ {
		p = p*6364136223846793005 + 1442695040888963407 // Knuth's MMIX LCG
		dst[n] = byte('a' + (p>>33)%26)
	}
	return n
}
