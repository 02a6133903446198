package checksum

// Schema tests: these values pin every algorithm forever. Each but KV is
// stored on disk (block trailers, footers, WAL records, whole-file
// checksums), so a failure here is a format break, not a test to update. KV
// (memtable protection bytes) lives only in memory; its row changed once, on
// 2026-11-30, when three fmix64 rounds became multiplies, and its CRC64 row
// was checked then against a bitwise Python implementation. KVUnsequenced
// (a batch's per-entry protection, also memory only) is KV's sum before its
// finish; its row was added with it (2026-12-03), KV's rows unchanged. The RocksDB rows are RocksDB's own schema-test values (table_test.cc
// ChecksumSchemas, research notes section A.5); the CRC-64 vectors are
// Valkey's (research notes F.1); the CRC64-type trailer rows and the XXH32
// vectors were derived independently with bitwise / from-the-spec Python
// implementations, not with this package.

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc64"
	"strings"
	"testing"
)

// trailerHex renders a checksum the way RocksDB's schema test prints it: the
// 4 bytes as stored (fixed32 little-endian), in upper-case hex.
func trailerHex(v uint32) string {
	var b [4]byte
	binary.LittleEndian.PutUint32(b[:], v)
	return fmt.Sprintf("%X", b[:])
}

var (
	goldenB0 = []byte("")
	goldenB1 = []byte("This is a short block!")
	goldenB2 = bytes.Repeat([]byte("This is a long block!"), 100)
)

func TestGoldenTrailers(t *testing.T) {
	if len(goldenB1) != 22 || len(goldenB2) != 2100 {
		t.Fatal("golden inputs have the wrong length")
	}
	inputs := map[string][]byte{"b0": goldenB0, "b1": goldenB1, "b2": goldenB2}
	cts := []byte{0x00, 0x01, 0x07} // none, snappy, zstd
	golden := []struct {
		t    Type
		in   string
		want [3]string // ct = 00, 01, 07
	}{
		{CRC32c, "b0", [3]string{"D28F2549", "052B2843", "46F8F711"}},
		{CRC32c, "b1", [3]string{"583F0355", "2F9B0A57", "ECE7DA1D"}},
		{CRC32c, "b2", [3]string{"943EF0AB", "43A2EDB1", "00E53D63"}},
		{XXHash, "b0", [3]string{"3EB065CF", "31F79238", "320D2E00"}},
		{XXHash, "b1", [3]string{"4A2E5FB0", "0BD9F652", "B4107E50"}},
		{XXHash, "b2", [3]string{"20F4D4BA", "8F1A1F99", "A191A338"}},
		{XXHash64, "b0", [3]string{"682705DB", "30E7211B", "B7BB58E8"}},
		{XXHash64, "b1", [3]string{"B74655EF", "B6C8BBBE", "AED9E3B4"}},
		{XXHash64, "b2", [3]string{"0D4999FE", "F5932423", "6B31BAB1"}},
		{XXH3, "b0", [3]string{"C294D338", "1B174353", "2D0E20C8"}},
		{XXH3, "b1", [3]string{"B37FB5E6", "6AFC258D", "5CE54616"}},
		{XXH3, "b2", [3]string{"FA2D482E", "23AED845", "15B7BBDE"}},
		// Default is XXH3: the same rows.
		{Default, "b0", [3]string{"C294D338", "1B174353", "2D0E20C8"}},
		{Default, "b1", [3]string{"B37FB5E6", "6AFC258D", "5CE54616"}},
		{Default, "b2", [3]string{"FA2D482E", "23AED845", "15B7BBDE"}},
		// Ours: low 32 bits of the inverted Jones CRC of data ‖ ct.
		{CRC64, "b0", [3]string{"2887ECEF", "510ED9DF", "2CAAF327"}},
		{CRC64, "b1", [3]string{"AB9665C1", "D21F50F1", "AFBB7A09"}},
		{CRC64, "b2", [3]string{"CB0C5B86", "B2856EB6", "CF21444E"}},
		{None, "b0", [3]string{"00000000", "00000000", "00000000"}},
		{None, "b1", [3]string{"00000000", "00000000", "00000000"}},
		{None, "b2", [3]string{"00000000", "00000000", "00000000"}},
	}
	seen := map[Type]bool{}
	for _, g := range golden {
		seen[g.t] = true
		data := inputs[g.in]
		for i, ct := range cts {
			if got := trailerHex(Block(g.t, data, ct)); got != g.want[i] {
				t.Errorf("Block(%s, %s, %02x) = %s, want %s", g.t, g.in, ct, got, g.want[i])
			}
			// The one-buffer form (footers) agrees.
			one := append(append([]byte(nil), data...), ct)
			if got := trailerHex(Value(g.t, one)); got != g.want[i] {
				t.Errorf("Value(%s, %s‖%02x) = %s, want %s", g.t, g.in, ct, got, g.want[i])
			}
		}
	}
	// Like RocksDB's test, fail when a type is added without golden values.
	for typ := Type(0); typ < NumTypes; typ++ {
		if !seen[typ] {
			t.Errorf("no golden trailer values for %s", typ)
		}
	}
}

func TestGoldenEmptyValue(t *testing.T) {
	want := map[Type]string{
		None:     "00000000",
		CRC32c:   "D8EA82A2",
		XXHash:   "055DCC02",
		XXHash64: "99E9D851",
		XXH3:     "00000000", // RocksDB's special case
		CRC64:    "00000000", // the CRC of nothing, in either form
		Default:  "00000000", // XXH3
	}
	for typ := Type(0); typ < NumTypes; typ++ {
		w, ok := want[typ]
		if !ok {
			t.Errorf("no golden empty value for %s", typ)
			continue
		}
		if got := trailerHex(Value(typ, nil)); got != w {
			t.Errorf("Value(%s, empty) = %s, want %s", typ, got, w)
		}
	}
}

const loremIpsum = "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor " +
	"incididunt ut labore et dolore magna aliqua. Ut enim ad minim veniam, quis nostrud " +
	"exercitation ullamco laboris nisi ut aliquip ex ea commodo consequat. Duis aute irure " +
	"dolor in reprehenderit in voluptate velit esse cillum dolore eu fugiat nulla pariatur. " +
	"Excepteur sint occaecat cupidatat non proident, sunt in culpa qui officia deserunt mollit " +
	"anim id est laborum."

func TestGoldenCRC64(t *testing.T) {
	if len(loremIpsum) != 445 {
		t.Fatalf("Lorem ipsum is %d bytes, want 445", len(loremIpsum))
	}
	withNUL := append([]byte(loremIpsum), 0) // Valkey hashes sizeof(li), NUL included
	vectors := []struct {
		name string
		data []byte
		want uint64
	}{
		{"123456789", []byte("123456789"), 0xe9c6d914c4b8d9ca},
		{"lorem+NUL", withNUL, 0xc7794709e69683b3},
		{"lorem", []byte(loremIpsum), 0x912d89c65cd3c415},
		{"empty", nil, 0},
	}
	for _, v := range vectors {
		for name, f := range crcImpls() {
			if got := f(0, v.data); got != v.want {
				t.Errorf("%s(%s) = %#x, want %#x", name, v.name, got, v.want)
			}
		}
		if got := bitwiseCRC64(0, v.data); got != v.want {
			t.Errorf("bitwise(%s) = %#x, want %#x", v.name, got, v.want)
		}
	}
	// The CRC64 checksum type is the inverted form, i.e. what hash/crc64
	// computes with the Jones table.
	if got := Sum64(CRC64, []byte("123456789")); got != 0x3558e8e979f60d7e {
		t.Errorf("Sum64(CRC64, 123456789) = %#x, want 0x3558e8e979f60d7e", got)
	}
}

// TestCRC64MatchesStdlib: UpdateCRC64 equals hash/crc64 with the Jones table
// and the inversions undone, and Sum64(CRC64) equals crc64.Checksum.
func TestCRC64MatchesStdlib(t *testing.T) {
	tab := crc64.MakeTable(JonesPoly)
	for n := 0; n < 5000; n += 1 + n/7 {
		p := benchData(n)
		if got, want := UpdateCRC64(0, p), ^crc64.Update(^uint64(0), tab, p); got != want {
			t.Fatalf("len %d: UpdateCRC64 = %#x, hash/crc64 = %#x", n, got, want)
		}
		if got, want := Sum64(CRC64, p), crc64.Checksum(p, tab); got != want {
			t.Fatalf("len %d: Sum64(CRC64) = %#x, crc64.Checksum = %#x", n, got, want)
		}
	}
}

func TestGoldenSum64(t *testing.T) {
	in := []byte("123456789")
	want := map[Type]uint64{
		None:     0,
		CRC32c:   0xe3069283, // crc32c check value, unmasked
		XXHash:   0x937bad67,
		XXHash64: 0x8cb841db40e6ae83,
		XXH3:     0x72dcb18b67a17dff, // zeebo/xxh3, which reproduces every RocksDB kXXH3 row above
		CRC64:    0x3558e8e979f60d7e,
		Default:  0x72dcb18b67a17dff, // XXH3
	}
	for typ := Type(0); typ < NumTypes; typ++ {
		w, ok := want[typ]
		if !ok {
			t.Errorf("no golden Sum64 for %s", typ)
			continue
		}
		if got := Sum64(typ, in); got != w {
			t.Errorf("Sum64(%s, 123456789) = %#x, want %#x", typ, got, w)
		}
	}
}

func TestGoldenXXH32(t *testing.T) {
	vectors := []struct {
		in   string
		want uint32
	}{
		{"", 0x02cc5d05},
		{"a", 0x550d7456},
		{"abc", 0x32d153ff},
		{"123456789", 0x937bad67},
		{"Nobody inspects the spammish repetition", 0xe2293b2f},
	}
	for _, v := range vectors {
		if got := XXH32([]byte(v.in), 0); got != v.want {
			t.Errorf("XXH32(%q) = %#08x, want %#08x", v.in, got, v.want)
		}
	}
}

func TestGoldenContextModifier(t *testing.T) {
	golden := []struct {
		base   uint32
		offset uint64
		want   uint32
	}{
		{0, 0, 0},
		{0, 0x123456789a, 0},
		{0x12345678, 0, 0x12345678},
		{0x12345678, 4096, 0x12345678 ^ 4096},
		{0x12345678, 1<<32 | 5, 0x12345678 ^ 6},
		{0xdeadbeef, 0xffffffff_ffffffff, 0xdeadbeef ^ 0xfffffffe},
		{1, 0x00000003_00000001, 1 ^ 4},
	}
	for _, g := range golden {
		if got := ContextModifier(g.base, g.offset); got != g.want {
			t.Errorf("ContextModifier(%#x, %#x) = %#x, want %#x", g.base, g.offset, got, g.want)
		}
	}
}

func TestGoldenKV(t *testing.T) {
	key, value := []byte("key"), []byte("value")
	const trailer = 42<<8 | 1 // seqnum 42, kind Set
	want := map[Type]uint64{
		None:     0,
		CRC32c:   0x3f8a8ef8d32b4a1c,
		XXHash:   0xbb7bee28958e9a49,
		XXHash64: 0x10e2c3155b51229c,
		XXH3:     0x304ad5571e5e1271,
		CRC64:    0xe6e8812a41760f0f,
		Default:  0x304ad5571e5e1271, // XXH3
	}
	var sb strings.Builder
	for typ := Type(0); typ < NumTypes; typ++ {
		got := KV(typ, key, trailer, value)
		fmt.Fprintf(&sb, "\t\t%s: %#x,\n", typ, got)
		if w, ok := want[typ]; !ok || got != w {
			t.Errorf("KV(%s) = %#x, want %#x", typ, got, w)
		}
	}
	if t.Failed() {
		t.Logf("current values:\n%s", sb.String())
	}
}

func TestGoldenKVUnsequenced(t *testing.T) {
	key, value := []byte("key"), []byte("value")
	// The CRC32c and CRC64 rows were checked against a bitwise Python
	// implementation when the function was added (2026-12-03).
	want := map[Type]uint64{
		None:     0,
		CRC32c:   0x6ea04a4bd86ef421,
		XXHash:   0xe68bd3ba730b09d,
		XXHash64: 0xe5bbc2301bd92862,
		XXH3:     0x108f2276559a5737,
		CRC64:    0xb040e830ebe07b1f,
		Default:  0x108f2276559a5737, // XXH3
	}
	var sb strings.Builder
	for typ := Type(0); typ < NumTypes; typ++ {
		got := KVUnsequenced(typ, key, 1, value)
		fmt.Fprintf(&sb, "\t\t%s: %#x,\n", typ, got)
		if w, ok := want[typ]; !ok || got != w {
			t.Errorf("KVUnsequenced(%s) = %#x, want %#x", typ, got, w)
		}
	}
	if t.Failed() {
		t.Logf("current values:\n%s", sb.String())
	}
}
