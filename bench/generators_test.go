package bench

import (
	"encoding/hex"
	"testing"
)

// TestRandom64Reference: the 10000th output of MT19937-64 with the default
// seed 5489 is the value the C++ standard requires of std::mt19937_64.
func TestRandom64Reference(t *testing.T) {
	r := newRandom64(5489)
	var v uint64
	for i := 0; i < 10000; i++ {
		v = r.Next()
	}
	if v != 9981545732273789042 {
		t.Fatalf("10000th output = %d, want 9981545732273789042", v)
	}
}

// TestKeysMatchDBBench pins keys that db_bench 7.8.3 wrote: `db_bench
// --benchmarks=fillrandom --num=1000000000 --writes=3 --seed=1`, dumped
// with ldb scan, holds keys 0x3A0A6759, 0x3305A633 and 0x1D801BDD (the
// thread's seed is --seed + 1; each write draws one number to pick a DB and
// one for the key) with the first three values of db_bench's value stream.
func TestKeysMatchDBBench(t *testing.T) {
	r := newRandom64(1 + 1)
	want := []uint64{0x3A0A6759, 0x3305A633, 0x1D801BDD}
	for i, w := range want {
		r.Next()
		if got := r.Next() % 1000000000; got != w {
			t.Errorf("write %d: key %#x, want %#x", i, got, w)
		}
	}
	g := NewValueGenerator(0.5, 100)
	// The first 50 bytes of each of the first values, as ldb printed them
	// (each value is those 50 bytes twice).
	wantVals := []string{
		"5e7b56687a22212f25774d5a3b276120462f52455a4a34547740254e587879323f2e417256435a3242365b6a6e5564293420",
		"624f7b5c5e61543f566d322e246865633b7e324c282b3d4b4f492c71543b4f7035595736734b7660692475745f415a3a5374",
		"7e407e543474706f51387a21466f652235444b33764b24346f5933675a22702340544d2e39563d5a67636f6f3f4c58793e54",
	}
	for i, w := range wantVals {
		v := g.Next(100)
		if got := hex.EncodeToString(v[:50]); got != w {
			t.Errorf("value %d starts %s, want %s", i, got, w)
		}
		if string(v[:50]) != string(v[50:]) {
			t.Errorf("value %d is not its first half twice", i)
		}
	}
}

func TestMakeKey(t *testing.T) {
	k := MakeKey(make([]byte, 16), 0x0102)
	if string(k) != "\x00\x00\x00\x00\x00\x00\x01\x0200000000" {
		t.Fatalf("key %q", k)
	}
	if k := MakeKey(make([]byte, 4), 0x0102030405060708); string(k) != "\x05\x06\x07\x08" {
		t.Fatalf("short key %q", k)
	}
}
