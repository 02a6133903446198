package checksum

import (
	"bytes"
	"hash/crc32"
	"hash/crc64"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"

	"github.com/cespare/xxhash/v2"
	"github.com/vigildb/vigil/internal/invariants"
	"github.com/zeebo/xxh3"
)

// refBlock computes the trailer checksum the obvious way, by building
// data ‖ lastByte and calling the reference libraries on it.
func refBlock(t Type, data []byte, last byte) uint32 {
	all := append(append([]byte(nil), data...), last)
	switch t {
	case CRC32c:
		return MaskCRC32c(crc32.Checksum(all, crc32.MakeTable(crc32.Castagnoli)))
	case XXHash:
		return XXH32(all, 0)
	case XXHash64:
		return uint32(xxhash.Sum64(all))
	case XXH3, Default:
		return uint32(xxh3.Hash(data)) ^ uint32(last)*0x6b9083d9
	case CRC64:
		return uint32(crc64.Checksum(all, crc64.MakeTable(JonesPoly)))
	}
	return 0
}

func TestBlockMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	buf := randBytes(r, 70000)
	lengths := []int{}
	for n := 0; n <= 300; n++ {
		lengths = append(lengths, n)
	}
	lengths = append(lengths, 1023, 1024, 1025, 4095, 4096, 4097, 65536, 65537)
	for _, n := range lengths {
		off := r.IntN(64)
		data := buf[off : off+n]
		last := byte(r.Uint32())
		for typ := Type(0); typ < NumTypes; typ++ {
			want := refBlock(typ, data, last)
			if got := Block(typ, data, last); got != want {
				t.Fatalf("Block(%s, len %d, %#x) = %#x, want %#x", typ, n, last, got, want)
			}
			one := append(append([]byte(nil), data...), last)
			if got := Value(typ, one); got != want {
				t.Fatalf("Value(%s, len %d) = %#x, want %#x", typ, n+1, got, want)
			}
		}
	}
}

// TestValueEqualsBlock is RocksDB's invariant: the one-buffer form with the
// last byte taken from the buffer equals the trailer form.
func TestValueEqualsBlock(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 24))
	for n := 1; n < 600; n++ {
		d := randBytes(r, n)
		for typ := Type(0); typ < NumTypes; typ++ {
			if a, b := Value(typ, d), Block(typ, d[:n-1], d[n-1]); a != b {
				t.Fatalf("%s len %d: Value %#x != Block %#x", typ, n, a, b)
			}
		}
	}
}

func TestSum64MatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(25, 26))
	for n := 0; n < 3000; n += 1 + n/5 {
		d := randBytes(r, n)
		want := map[Type]uint64{
			None:     0,
			CRC32c:   uint64(crc32.Checksum(d, crc32.MakeTable(crc32.Castagnoli))),
			XXHash:   uint64(XXH32(d, 0)),
			XXHash64: xxhash.Sum64(d),
			XXH3:     xxh3.Hash(d),
			CRC64:    crc64.Checksum(d, crc64.MakeTable(JonesPoly)),
			Default:  xxh3.Hash(d),
		}
		for typ, w := range want {
			if got := Sum64(typ, d); got != w {
				t.Fatalf("Sum64(%s, len %d) = %#x, want %#x", typ, n, got, w)
			}
		}
	}
}

// TestZeroInputs is RocksDB's ChecksumZeroInputs: no checksum type other
// than None may be 0 for an all-zero input, because zeroed storage (a hole,
// a zeroed page) would then pass its check. Lengths 1..20000 (up to
// VIGIL_THOROUGH_CHECKSUM_LEN with that env var); under -race or -short a
// sample, as the race detector slows the pure-Go hashes down many times.
func TestZeroInputs(t *testing.T) {
	maxLen := 20000
	if s := os.Getenv("VIGIL_THOROUGH_CHECKSUM_LEN"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("VIGIL_THOROUGH_CHECKSUM_LEN: %v", err)
		}
		maxLen = n
	}
	sample := invariants.RaceEnabled || testing.Short()
	zeros := make([]byte, maxLen)
	for n := 1; n <= maxLen; n++ {
		if sample && n > 1024 && n%97 != 0 && n != maxLen {
			continue
		}
		d := zeros[:n]
		for typ := CRC32c; typ < NumTypes; typ++ {
			if Value(typ, d) == 0 {
				t.Fatalf("Value(%s, %d zero bytes) = 0", typ, n)
			}
			if Block(typ, d[:n-1], 0) == 0 {
				t.Fatalf("Block(%s, %d zero bytes ‖ 0) = 0", typ, n-1)
			}
			if Sum64(typ, d) == 0 {
				t.Fatalf("Sum64(%s, %d zero bytes) = 0", typ, n)
			}
		}
	}
}

// TestNoAllocs: no checksum path allocates, for any type or length
// (the stack-buffered tails of XXH32/XXH64 and the CRC byte step included).
func TestNoAllocs(t *testing.T) {
	data := benchData(5000)
	CombineCRC64(1, 2, 3) // build the shift table outside the measurement
	for typ := Type(0); typ < NumTypes; typ++ {
		for _, n := range []int{0, 1, 7, 8, 15, 16, 17, 31, 32, 33, 63, 64, 100, 4096, 5000} {
			d := data[:n]
			allocs := testing.AllocsPerRun(20, func() {
				sink32 = Block(typ, d, 7)
				sink32 = Value(typ, d)
				sink64 = Sum64(typ, d)
				sink64 = KV(typ, d, 1, d)
			})
			if allocs != 0 {
				t.Errorf("%s, len %d: %v allocations per run", typ, n, allocs)
			}
		}
	}
	allocs := testing.AllocsPerRun(20, func() {
		sink64 = UpdateCRC64(1, data)
		sink64 = updateCRC64Generic(1, data)
		sink64 = CombineCRC64(sink64, 5, 1<<40+12345)
		sink64 = combineCRC64Generic(sink64, 5, 1<<40+12345)
		sink32 = XXH32(data, 0)
	})
	if allocs != 0 {
		t.Errorf("CRC64 / XXH32: %v allocations per run", allocs)
	}
}

// TestKVDetectsChanges: KV mixes key, trailer and value through bijections,
// so changing any one of them (one bit), swapping key and value, or moving
// bytes across the key/value boundary changes the result.
func TestKVDetectsChanges(t *testing.T) {
	r := rand.New(rand.NewPCG(27, 28))
	flip := func(b []byte) []byte {
		c := append([]byte(nil), b...)
		i := r.IntN(len(c))
		c[i] ^= 1 << r.IntN(8)
		return c
	}
	for typ := CRC32c; typ < NumTypes; typ++ {
		for i := 0; i < 300; i++ {
			key := randBytes(r, 1+r.IntN(40))
			value := randBytes(r, 1+r.IntN(200))
			trailer := r.Uint64()
			base := KV(typ, key, trailer, value)
			variants := map[string]uint64{
				"key bit":   KV(typ, flip(key), trailer, value),
				"value bit": KV(typ, key, trailer, flip(value)),
				"trailer":   KV(typ, key, trailer^(1<<r.IntN(64)), value),
				"swapped":   KV(typ, value, trailer, key),
				"boundary":  KV(typ, key[:len(key)-1], trailer, append([]byte{key[len(key)-1]}, value...)),
				"key+1":     KV(typ, append(append([]byte(nil), key...), 0), trailer, value),
			}
			if bytes.Equal(key, value) {
				delete(variants, "swapped")
			}
			for what, v := range variants {
				if v == base {
					t.Fatalf("%s: changing the %s did not change KV (%#x)", typ, what, v)
				}
			}
		}
	}
	if KV(None, []byte("k"), 1, []byte("v")) != 0 {
		t.Fatal("KV(None) != 0")
	}
}

func TestContextModifierProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 32))
	for i := 0; i < 1000; i++ {
		off := r.Uint64()
		if ContextModifier(0, off) != 0 {
			t.Fatalf("base 0 must disable the modifier (offset %#x)", off)
		}
		base := r.Uint32() | 1
		// Offsets within the same 4 GiB window differ in their low word.
		a := off
		b := off&^0xffffffff | uint64(uint32(off)+1+r.Uint32N(1<<31))
		if ContextModifier(base, a) == ContextModifier(base, b) {
			t.Fatalf("base %#x: offsets %#x and %#x share a modifier", base, a, b)
		}
		// Offsets a multiple of 4 GiB apart differ in their high word.
		c := off + uint64(1+r.IntN(1<<20))<<32
		if ContextModifier(base, off) == ContextModifier(base, c) {
			t.Fatalf("base %#x: offsets %#x and %#x share a modifier", base, off, c)
		}
		// Different files (bases) give different modifiers at one offset.
		if ContextModifier(base, off) == ContextModifier(base^2, off) {
			t.Fatalf("bases %#x and %#x share a modifier at %#x", base, base^2, off)
		}
	}
}

func TestMaskCRC32c(t *testing.T) {
	r := rand.New(rand.NewPCG(33, 34))
	for i := 0; i < 1000; i++ {
		c := r.Uint32()
		if UnmaskCRC32c(MaskCRC32c(c)) != c {
			t.Fatalf("Unmask(Mask(%#x)) != %#x", c, c)
		}
	}
	if MaskCRC32c(0) != 0xa282ead8 {
		t.Fatalf("Mask(0) = %#x", MaskCRC32c(0))
	}
}

// TestKVSplit: KV is KVSequence of KVUnsequenced, for every type, so the
// memtable can derive an entry's checksum from its batch's; and a kind
// that differs between the two halves never gives the entry's KV.
func TestKVSplit(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 32))
	kinds := []uint8{0, 1, 15}
	for typ := CRC32c; typ < NumTypes; typ++ {
		for i := 0; i < 300; i++ {
			key := randBytes(r, r.IntN(40))
			value := randBytes(r, r.IntN(200))
			kind := kinds[r.IntN(len(kinds))]
			trailer := r.Uint64()>>8<<8 | uint64(kind)
			u := KVUnsequenced(typ, key, kind, value)
			if got, want := KVSequence(u, trailer), KV(typ, key, trailer, value); got != want {
				t.Fatalf("%s: KVSequence(KVUnsequenced) = %#x, KV = %#x", typ, got, want)
			}
			for _, other := range kinds {
				if other == kind {
					continue
				}
				tr := trailer>>8<<8 | uint64(other)
				if KVSequence(u, tr) == KV(typ, key, tr, value) {
					t.Fatalf("%s: kind %d sequenced as kind %d gave that kind's KV", typ, kind, other)
				}
				if KVUnsequenced(typ, key, other, value)^u == 0 {
					t.Fatalf("%s: kinds %d and %d give the same KVUnsequenced", typ, kind, other)
				}
			}
		}
	}
	if KVUnsequenced(None, []byte("k"), 1, []byte("v")) != 0 {
		t.Fatal("KVUnsequenced(None) != 0")
	}
}

// TestKVUnsequencedKindsLowByte: a batch may keep only the low byte of
// KVUnsequenced, so the entry kinds (delete 0, set 1, range delete 15) must
// differ there, or a flipped kind would escape one protection byte always
// rather than with probability 2^-8.
func TestKVUnsequencedKindsLowByte(t *testing.T) {
	kinds := []uint8{0, 1, 15}
	for _, a := range kinds {
		for _, b := range kinds {
			if a < b && (kvTrailerTerm(uint64(a))^kvTrailerTerm(uint64(b)))&0xff == 0 {
				t.Errorf("kinds %d and %d agree in KVUnsequenced's low byte", a, b)
			}
		}
	}
}

// TestKVUnsequencedDetectsChanges is TestKVDetectsChanges for the half a
// batch keeps, kind included.
func TestKVUnsequencedDetectsChanges(t *testing.T) {
	r := rand.New(rand.NewPCG(33, 34))
	flip := func(b []byte) []byte {
		c := append([]byte(nil), b...)
		c[r.IntN(len(c))] ^= 1 << r.IntN(8)
		return c
	}
	for typ := CRC32c; typ < NumTypes; typ++ {
		for i := 0; i < 300; i++ {
			key := randBytes(r, 1+r.IntN(40))
			value := randBytes(r, 1+r.IntN(200))
			base := KVUnsequenced(typ, key, 1, value)
			variants := map[string]uint64{
				"key bit":   KVUnsequenced(typ, flip(key), 1, value),
				"value bit": KVUnsequenced(typ, key, 1, flip(value)),
				"kind":      KVUnsequenced(typ, key, 0, value),
				"swapped":   KVUnsequenced(typ, value, 1, key),
				"boundary":  KVUnsequenced(typ, key[:len(key)-1], 1, append([]byte{key[len(key)-1]}, value...)),
			}
			if bytes.Equal(key, value) {
				delete(variants, "swapped")
			}
			for what, v := range variants {
				if v == base {
					t.Fatalf("%s: changing the %s did not change KVUnsequenced (%#x)", typ, what, v)
				}
			}
		}
	}
}
