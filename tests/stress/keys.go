package stress

import (
	"encoding/binary"
	"fmt"
	"strconv"

	"github.com/vigildb/vigil/internal/base"
)

// Keys are the integers 0..n-1 of a run's key space, encoded so that byte
// order equals integer order: "k", ten decimal digits, then 0..pad-1 filler
// bytes 'x' chosen from the integer. The padding varies key lengths (and so
// exercises prefix compression and the skiplist's abbreviated keys) without
// changing the order, since two different keys already differ in their
// digits.
const (
	keyPrefix    = 'k'
	keyDigits    = 10
	keyHeaderLen = 1 + keyDigits
	// maxKeys bounds the key space: the ten digits, and the uint32 key
	// numbers of the op log and state file.
	maxKeys = 1 << 30
)

// keyCodec encodes and decodes the keys of one run.
type keyCodec struct {
	n   int // key space size
	pad int // maximum filler length (exclusive); 0 = none
}

// padLen returns the filler length of key i.
func (c keyCodec) padLen(i int) int {
	if c.pad <= 1 {
		return 0
	}
	return int(mix64(uint64(i), 0x9e37) % uint64(c.pad))
}

// appendKey appends the encoding of key i to dst.
func (c keyCodec) appendKey(dst []byte, i int) []byte {
	dst = append(dst, keyPrefix)
	var digits [keyDigits]byte
	v := uint64(i)
	for j := keyDigits - 1; j >= 0; j-- {
		digits[j] = byte('0' + v%10)
		v /= 10
	}
	dst = append(dst, digits[:]...)
	for j := c.padLen(i); j > 0; j-- {
		dst = append(dst, 'x')
	}
	return dst
}

// key returns the encoding of key i in a new slice.
func (c keyCodec) key(i int) []byte { return c.appendKey(make([]byte, 0, keyHeaderLen+c.pad), i) }

// decode returns the integer of an encoded key. Anything the runner did not
// write (a key outside the key space, bytes a bit flip produced) is an
// error: the DB returned a key that should not exist.
func (c keyCodec) decode(k []byte) (int, error) {
	if len(k) < keyHeaderLen || k[0] != keyPrefix {
		return 0, fmt.Errorf("key %s is not a stress key (want %q and %d digits)", base.HexKey(k), keyPrefix, keyDigits)
	}
	v := 0
	for _, d := range k[1:keyHeaderLen] {
		if d < '0' || d > '9' {
			return 0, fmt.Errorf("key %s is not a stress key (non-digit %q)", base.HexKey(k), d)
		}
		v = v*10 + int(d-'0')
	}
	if v >= c.n {
		return 0, fmt.Errorf("key %s (number %d) is outside the key space [0, %d)", base.HexKey(k), v, c.n)
	}
	if len(k) != keyHeaderLen+c.padLen(v) {
		return 0, fmt.Errorf("key %s (number %d) has %d filler bytes, want %d", base.HexKey(k), v, len(k)-keyHeaderLen, c.padLen(v))
	}
	for _, b := range k[keyHeaderLen:] {
		if b != 'x' {
			return 0, fmt.Errorf("key %s (number %d) has a bad filler byte %q", base.HexKey(k), v, b)
		}
	}
	return v, nil
}

// keyName renders key i for reports: the key itself is printable.
func (c keyCodec) keyName(i int) string { return strconv.Quote(string(c.key(i))) }

// Values are derived from (key, version), so any value read back can be
// checked without storing it:
//
//	+------+---------+-------------+----------------------------+
//	| tag  | key u32 | version u32 | filler (length from hash)  |
//	+------+---------+-------------+----------------------------+
//
// tag is 'V' for a value a write left as the key's state, 'T' for a
// transient value that a later entry of the same batch overwrites: a reader
// must never see a 'T' value. Integers are big-endian. filler[j] =
// byte(h>>(8*(j%8))) ^ byte(j) with h = mix64(key, version), and the filler
// length is h>>32 modulo (maxValue+1). The format is pinned by a golden test
// because values of one run are read back by the next (kill mode).
const (
	valueTagFinal     = 'V'
	valueTagTransient = 'T'
	valueHeaderLen    = 9
)

// valueCodec generates and checks the values of one run.
type valueCodec struct {
	maxFiller int
}

// fillerLen returns the filler length of (key, version).
func (c valueCodec) fillerLen(h uint64) int {
	if c.maxFiller <= 0 {
		return 0
	}
	return int((h >> 32) % uint64(c.maxFiller+1))
}

// appendValue appends the value of (key, version) to dst.
func (c valueCodec) appendValue(dst []byte, key int, version uint32, transient bool) []byte {
	tag := byte(valueTagFinal)
	if transient {
		tag = valueTagTransient
	}
	dst = append(dst, tag)
	dst = binary.BigEndian.AppendUint32(dst, uint32(key))
	dst = binary.BigEndian.AppendUint32(dst, version)
	h := mix64(uint64(key), uint64(version))
	n := c.fillerLen(h)
	j := 0
	for ; j+8 <= n; j += 8 {
		dst = binary.LittleEndian.AppendUint64(dst, fillerWord(h, j))
	}
	for ; j < n; j++ {
		dst = append(dst, byte(h>>(8*(j%8)))^byte(j))
	}
	return dst
}

// fillerWord returns filler bytes j..j+7 (j a multiple of 8) as a
// little-endian word: byte i is byte(h>>(8*i)) ^ byte(j+i). byte(j+i) is
// byte(j)+i without a carry between bytes, since byte(j) <= 248 and i < 8.
func fillerWord(h uint64, j int) uint64 {
	return h ^ (uint64(byte(j))*0x0101010101010101 + 0x0706050403020100)
}

// decodedValue is what a value says about itself.
type decodedValue struct {
	key       int
	version   uint32
	transient bool
}

// decodeValue parses and fully checks a value read from the DB: header,
// length and every filler byte must be those appendValue produces. Any
// mismatch is an error describing the first difference.
func (c valueCodec) decodeValue(v []byte) (decodedValue, error) {
	if len(v) < valueHeaderLen {
		return decodedValue{}, fmt.Errorf("value of %d bytes is shorter than the %d-byte header", len(v), valueHeaderLen)
	}
	var d decodedValue
	switch v[0] {
	case valueTagFinal:
	case valueTagTransient:
		d.transient = true
	default:
		return decodedValue{}, fmt.Errorf("value has unknown tag byte 0x%02x", v[0])
	}
	k := binary.BigEndian.Uint32(v[1:5])
	if uint64(k) >= maxKeys {
		return decodedValue{}, fmt.Errorf("value names key number %d, beyond any key space", k)
	}
	d.key = int(k)
	d.version = binary.BigEndian.Uint32(v[5:9])
	h := mix64(uint64(d.key), uint64(d.version))
	n := c.fillerLen(h)
	if len(v) != valueHeaderLen+n {
		return d, fmt.Errorf("value of key %d version %d is %d bytes, want %d", d.key, d.version, len(v), valueHeaderLen+n)
	}
	f := v[valueHeaderLen:]
	j := 0
	for ; j+8 <= len(f); j += 8 {
		if binary.LittleEndian.Uint64(f[j:]) != fillerWord(h, j) {
			break // the byte loop below names the first difference
		}
	}
	for ; j < len(f); j++ {
		if want := byte(h>>(8*(j%8))) ^ byte(j); f[j] != want {
			return d, fmt.Errorf("value of key %d version %d differs at byte %d: 0x%02x, want 0x%02x", d.key, d.version, valueHeaderLen+j, f[j], want)
		}
	}
	return d, nil
}

// mix64 is a 64-bit finalizer (SplitMix64's) over two words: a cheap,
// well-mixed hash for deriving filler bytes and key padding.
func mix64(a, b uint64) uint64 {
	z := a*0x9e3779b97f4a7c15 + b + 0x632be59bd9b4e019
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}
