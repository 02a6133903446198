package stress

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"testing"
)

func TestKeyRoundTripAndOrder(t *testing.T) {
	for _, c := range []keyCodec{{n: 10}, {n: 1000, pad: 4}, {n: 100000, pad: 24}} {
		prev := []byte(nil)
		for i := 0; i < c.n; i += 1 + i/7 {
			k := c.key(i)
			got, err := c.decode(k)
			if err != nil || got != i {
				t.Fatalf("%+v: decode(key(%d)=%q) = %d, %v", c, i, k, got, err)
			}
			if prev != nil && bytes.Compare(prev, k) >= 0 {
				t.Fatalf("%+v: key order broken: %q then %q", c, prev, k)
			}
			prev = k
		}
	}
}

func TestKeyDecodeRejects(t *testing.T) {
	c := keyCodec{n: 100, pad: 8}
	good := c.key(42)
	bad := map[string][]byte{
		"empty":        nil,
		"short":        good[:5],
		"prefix":       append([]byte{'j'}, good[1:]...),
		"non-digit":    append(append([]byte{}, good[:3]...), append([]byte{'a'}, good[4:]...)...),
		"out of space": keyCodec{n: 1000, pad: 8}.key(500),
		"extra pad":    append(append([]byte{}, good...), 'x'),
	}
	if c.padLen(42) > 0 {
		bad["bad pad"] = append(append([]byte{}, good[:len(good)-1]...), 'y')
		bad["missing pad"] = good[:len(good)-1]
	}
	for name, k := range bad {
		if v, err := c.decode(k); err == nil {
			t.Errorf("%s: decode(%q) = %d, want an error", name, k, v)
		}
	}
}

func TestValueRoundTrip(t *testing.T) {
	for _, maxFiller := range []int{0, 1, 24, 9000} {
		c := valueCodec{maxFiller: maxFiller}
		for k := 0; k < 50; k++ {
			for v := uint32(1); v < 20; v++ {
				for _, tr := range []bool{false, true} {
					val := c.appendValue(nil, k, v, tr)
					if n := len(val) - valueHeaderLen; n < 0 || n > maxFiller {
						t.Fatalf("value length %d outside [0, %d] filler", len(val), maxFiller)
					}
					d, err := c.decodeValue(val)
					if err != nil || d != (decodedValue{key: k, version: v, transient: tr}) {
						t.Fatalf("decode(value(%d, %d, %v)) = %+v, %v", k, v, tr, d, err)
					}
				}
			}
		}
	}
}

// TestValueDetectsEveryByteChange flips every bit of some values: each
// flip must make decodeValue fail or name another (key, version), which
// the callers reject as a value of the wrong key or write.
func TestValueDetectsEveryByteChange(t *testing.T) {
	c := valueCodec{maxFiller: 40}
	for k := 0; k < 8; k++ {
		val := c.appendValue(nil, k, uint32(k*3+1), false)
		for bit := 0; bit < 8*len(val); bit++ {
			mut := append([]byte{}, val...)
			mut[bit/8] ^= 1 << (bit % 8)
			d, err := c.decodeValue(mut)
			if err == nil && d.key == k && d.version == uint32(k*3+1) && !d.transient {
				t.Fatalf("flip of bit %d of %x went unnoticed", bit, val)
			}
		}
		for n := 0; n < len(val); n++ {
			if d, err := c.decodeValue(val[:n]); err == nil {
				t.Fatalf("truncation to %d bytes decoded as %+v", n, d)
			}
		}
	}
}

// TestValueGolden pins the value format: kill mode reads values a child
// wrote, and a report names versions decoded from values.
func TestValueGolden(t *testing.T) {
	c := valueCodec{maxFiller: 24}
	for _, g := range []struct {
		key  int
		ver  uint32
		tr   bool
		want string
	}{
		// Derived independently (a Python re-implementation of the
		// format and of mix64), not copied from this package's output.
		{0, 1, false, "560000000000000001dbbc542ba8ab8c68d3b4"},
		{7, 3, false, "560000000700000003ee10d39172e0d97ae618db997ae8d172fe00c381"},
		{123456, 70000, true, "540001e24000011170633a3e593e6771836b323651366f798b73"},
	} {
		got := hex.EncodeToString(c.appendValue(nil, g.key, g.ver, g.tr))
		if got != g.want {
			t.Errorf("value(%d, %d, %v) = %s, want %s", g.key, g.ver, g.tr, got, g.want)
		}
	}
	for i, want := range map[int]string{17: "k0000000017", 10: "k0000000010xxx", 16: "k0000000016x"} {
		if got := string(keyCodec{n: 1000, pad: 4}.key(i)); got != want {
			t.Errorf("key(%d) = %q, want %q", i, got, want)
		}
	}
}

func FuzzDecodeValue(f *testing.F) {
	c := valueCodec{maxFiller: 100}
	f.Add(c.appendValue(nil, 3, 9, false))
	f.Add(c.appendValue(nil, 1<<20, 1<<31, true))
	f.Add([]byte{})
	f.Add([]byte("V\xff\xff\xff\xff\x00\x00\x00\x01"))
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := c.decodeValue(b)
		if err != nil {
			return
		}
		// Whatever decodes must be exactly what appendValue produces.
		if again := c.appendValue(nil, d.key, d.version, d.transient); !bytes.Equal(again, b) {
			t.Fatalf("decoded %+v from %x, which encodes as %x", d, b, again)
		}
	})
}

func FuzzDecodeKey(f *testing.F) {
	c := keyCodec{n: 5000, pad: 8}
	f.Add(c.key(0))
	f.Add(c.key(4999))
	f.Add([]byte("k9999999999"))
	f.Fuzz(func(t *testing.T, b []byte) {
		k, err := c.decode(b)
		if err != nil {
			return
		}
		if k < 0 || k >= c.n || !bytes.Equal(c.key(k), b) {
			t.Fatalf("decoded %d from %q", k, b)
		}
	})
}

// BenchmarkValue generates and fully checks one value: the runner's cost
// per value read or written.
func BenchmarkValue(b *testing.B) {
	for _, filler := range []int{100, 9000} {
		b.Run(fmt.Sprintf("filler=%d", filler), func(b *testing.B) {
			c := valueCodec{maxFiller: filler}
			rng := rand.New(rand.NewPCG(1, 2))
			var buf []byte
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				buf = c.appendValue(buf[:0], rng.IntN(100000), uint32(i), false)
				if _, err := c.decodeValue(buf); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
