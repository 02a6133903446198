package memtable

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/vigildb/vigil/checksum"
	"github.com/vigildb/vigil/internal/base"
	"github.com/vigildb/vigil/internal/testcmp"
	"github.com/vigildb/vigil/skiplist"
)

func isCorrupt(err error) bool { return errors.Is(err, base.ErrCorruption) }

// orderCorruption is a key order corruption scenario under one comparer:
// three user keys in the comparer's order, and the change (byte at of the
// middle key becomes b) that makes the middle key sort before the first
// while staying below the last.
type orderCorruption struct {
	cmp  *base.Comparer
	keys [3][]byte
	at   int
	b    byte
}

// orderCorruptions: RocksDB's IntegrityChecks scenario (key000001 becomes
// aey000001) and its mirror under each test comparer; Versioned's changes
// only the version, which the comparer's abbreviation (the prefix) does not
// see, so its Compare must.
func orderCorruptions() []orderCorruption {
	k := func(s string) []byte { return []byte(s) }
	vk := func(v uint64) []byte { return testcmp.VersionedKey([]byte("key"), v) }
	return []orderCorruption{
		{base.DefaultComparer, [3][]byte{k("key000000"), k("key000001"), k("key000002")}, 0, 'a'},
		{testcmp.Reverse, [3][]byte{k("key000002"), k("key000001"), k("key000000")}, 0, 'z'},
		{testcmp.Versioned, [3][]byte{vk(3), vk(2), vk(1)}, 3 + 7, 9},
	}
}

// corrupted returns the middle key as the corruption leaves it.
func (c orderCorruption) corrupted() []byte {
	k := bytes.Clone(c.keys[1])
	k[c.at] = c.b
	return k
}

// build makes the memtable: with tower height forced to 1, add the first,
// the last and then the middle key, then change the middle key in the
// arena. The list is then first → middle' → last: out of order. No
// protection bytes, so only the order checks can see it.
func (c orderCorruption) build(t *testing.T, paranoid bool) *MemTable {
	t.Helper()
	m := mustNew(t, Options{ParanoidMemoryChecks: paranoid, maxHeight: 1, Comparer: c.cmp})
	for i, j := range []int{0, 2, 1} {
		if err := m.Add(uint64(i+1), base.KindSet, c.keys[j], []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	ko, _, _, _, ok := m.entryForTesting(c.keys[1])
	if !ok {
		t.Fatalf("%x not found", c.keys[1])
	}
	m.arenaForTesting()[ko+c.at] = c.b
	return m
}

// buildOrderCorruption is the default comparer's scenario: key000000,
// key000001 changed to aey000001, key000002.
func buildOrderCorruption(t *testing.T, paranoid bool) *MemTable {
	return orderCorruptions()[0].build(t, paranoid)
}

func TestCorruptKeyOrder(t *testing.T) {
	for _, c := range orderCorruptions() {
		t.Run(c.cmp.Name, func(t *testing.T) { runCorruptKeyOrder(t, c) })
	}
}

func runCorruptKeyOrder(t *testing.T, c orderCorruption) {
	k0, k1, k2 := c.keys[0], c.keys[1], c.keys[2]
	t.Run("paranoid", func(t *testing.T) {
		m := c.build(t, true)
		_, _, _, found, err := m.Get(k1, base.SeqNumMax)
		if found || !isCorrupt(err) {
			t.Fatalf("Get: found=%t err=%v, want ErrCorruption", found, err)
		}
		if !errors.Is(err, skiplist.ErrCorruption) {
			t.Errorf("Get error lost the skiplist cause: %v", err)
		}
		// The error names both keys of the broken pair in hex.
		for _, k := range [][]byte{k0, c.corrupted()} {
			if hexKey := fmt.Sprintf("%x", k); !strings.Contains(err.Error(), hexKey) {
				t.Errorf("Get error %q does not name %s", err, hexKey)
			}
		}
		it := m.NewIter(IterOptions{})
		check := func(what string, ok bool) {
			t.Helper()
			if ok || it.Valid() || !isCorrupt(it.Error()) {
				t.Errorf("%s: ok=%t valid=%t err=%v, want ErrCorruption and invalid", what, ok, it.Valid(), it.Error())
			}
		}
		check("SeekGE(middle)", it.SeekGE(k1))
		check("SeekLT(last)", it.SeekLT(k2))
		// The search ends on the first key and looks one step ahead, into
		// the damage.
		check("SeekGE(first)", it.SeekGE(k0))
		check("First+Next", it.First() && it.Next())
		if !it.Last() {
			t.Fatalf("Last lands on the last key (in order with the changed one): %v", it.Error())
		}
		check("Last+Prev", it.Prev())
		if it.Next() || it.Prev() {
			t.Error("moves after a failure must stay invalid")
		}
		// An absolute positioning call clears the error.
		if !it.Last() || it.Error() != nil {
			t.Errorf("Last after failure: %v", it.Error())
		}
	})
	t.Run("unchecked", func(t *testing.T) {
		// The same damage without paranoid checks goes unreported: that is
		// what the option buys.
		m := c.build(t, false)
		if _, _, _, found, err := m.Get(k1, base.SeqNumMax); found || err != nil {
			t.Fatalf("Get without checks: found=%t err=%v; expected a silent miss", found, err)
		}
		it := m.NewIter(IterOptions{})
		var keys [][]byte
		for ok := it.First(); ok; ok = it.Next() {
			keys = append(keys, it.Key().UserKey)
		}
		for ok := it.Last(); ok; ok = it.Prev() {
		}
		it.SeekGE(k1)
		it.SeekLT(k2)
		if want := [][]byte{k0, c.corrupted(), k2}; it.Error() != nil || !slices.EqualFunc(keys, want, bytes.Equal) {
			t.Fatalf("unchecked reads: %q, err %v, want %q", keys, it.Error(), want)
		}
		// The flush forces validation on an unparanoid memtable.
		fit := m.NewIter(IterOptions{Validate: true})
		ok := fit.First() && fit.Next()
		if ok || !isCorrupt(fit.Error()) {
			t.Fatalf("forced validation: ok=%t err=%v", ok, fit.Error())
		}
		// And Validate always checks.
		if err := m.Validate(); !isCorrupt(err) || !strings.Contains(err.Error(), "out of order") {
			t.Fatalf("Validate: %v", err)
		}
	})
}

// TestCorruptValue flips one value byte: with 8 protection bytes every read
// of that entry fails, other entries still read; without protection the
// flipped value is returned silently.
func TestCorruptValue(t *testing.T) {
	for _, prot := range []int{0, 8} {
		o := Options{ProtectionBytesPerKey: prot}
		if prot > 0 {
			o.ChecksumType = checksum.XXH3
		}
		m := mustNew(t, o)
		for i := 0; i < 10; i++ {
			m.Add(uint64(i+1), base.KindSet, []byte(fmt.Sprintf("k%d", i)), []byte(fmt.Sprintf("value-%d", i)))
		}
		_, _, vo, _, _ := m.entryForTesting([]byte("k5"))
		m.arenaForTesting()[vo+2] ^= 0x10

		v, _, _, found, err := m.Get([]byte("k5"), base.SeqNumMax)
		it := m.NewIter(IterOptions{})
		n := 0
		for ok := it.First(); ok; ok = it.Next() {
			n++
		}
		if prot == 0 {
			if err != nil || !found || string(v) != "va|ue-5" || n != 10 || it.Error() != nil || m.Validate() != nil {
				t.Fatalf("unprotected: Get %q %t %v, iterated %d (%v)", v, found, err, n, it.Error())
			}
			continue
		}
		if found || !isCorrupt(err) || !strings.Contains(err.Error(), "checksum mismatch") {
			t.Fatalf("Get(k5): found=%t err=%v", found, err)
		}
		if n != 5 || !isCorrupt(it.Error()) {
			t.Fatalf("iteration stopped after %d entries with %v, want 5 and ErrCorruption", n, it.Error())
		}
		if it.SeekGE([]byte("k5")) || !isCorrupt(it.Error()) {
			t.Fatalf("SeekGE(k5): %v", it.Error())
		}
		// A seek also verifies the entry on the other side of where it
		// stops: SeekGE(k6) checks k5.
		if it.SeekGE([]byte("k6")) || !isCorrupt(it.Error()) {
			t.Fatalf("SeekGE(k6) next to the damage: %v", it.Error())
		}
		if !it.SeekGE([]byte("k7")) || !it.Prev() || it.Prev() || !isCorrupt(it.Error()) {
			t.Fatalf("Prev onto k5: %v", it.Error())
		}
		if _, _, _, found, err := m.Get([]byte("k4"), base.SeqNumMax); !found || err != nil {
			t.Fatalf("Get(k4) next to the damage: %t %v", found, err)
		}
		if err := m.Validate(); !isCorrupt(err) || !strings.Contains(err.Error(), "checksum mismatch") {
			t.Fatalf("Validate: %v", err)
		}
	}
}

// TestValidateCatches covers Validate's three kinds of finding.
func TestValidateCatches(t *testing.T) {
	build := func() *MemTable {
		m := mustNew(t, Options{ChecksumType: checksum.CRC32c, ProtectionBytesPerKey: 4, maxHeight: 1})
		for i := 0; i < 3; i++ {
			m.Add(uint64(i+1), base.KindSet, []byte(fmt.Sprintf("key%06d", i)), []byte("v"))
		}
		if err := m.Validate(); err != nil {
			t.Fatal(err)
		}
		return m
	}
	t.Run("count", func(t *testing.T) {
		m := build()
		m.count.Add(1) // an Add that "succeeded" but whose entry is not there
		if err := m.Validate(); !isCorrupt(err) || !strings.Contains(err.Error(), "found 3 entries") || !strings.Contains(err.Error(), "4 were added") {
			t.Fatalf("Validate: %v", err)
		}
	})
	t.Run("unlinked-entry", func(t *testing.T) {
		// Really lose the middle entry: splice it out of level 0 (height
		// is 1) in the arena, keeping the back link consistent so that only
		// the count can tell. Skiplist node layout: next[0] at the node
		// offset, prev[0] 4 bytes after, the packed lengths 8 after, the
		// key 12 after.
		m := build()
		arena := m.arenaForTesting()
		node := func(k string) uint32 {
			ko, _, _, _, _ := m.entryForTesting([]byte(k))
			return uint32(ko - 12)
		}
		n0, n2 := node("key000000"), node("key000002")
		binary.LittleEndian.PutUint32(arena[n0:], n2)
		binary.LittleEndian.PutUint32(arena[n2+4:], n0)
		if err := m.Validate(); !isCorrupt(err) || !strings.Contains(err.Error(), "found 2 entries") {
			t.Fatalf("Validate: %v", err)
		}
	})
	t.Run("checksum", func(t *testing.T) {
		m := build()
		ko, kl, _, _, _ := m.entryForTesting([]byte("key000001"))
		m.arenaForTesting()[ko+kl+1] ^= 4 // a seqnum bit of the trailer: order kept
		err := m.Validate()
		if !isCorrupt(err) || !strings.Contains(err.Error(), "checksum mismatch") || !strings.Contains(err.Error(), "6b6579303030303031") {
			t.Fatalf("Validate: %v", err)
		}
	})
	t.Run("trailer-kind", func(t *testing.T) {
		m := mustNew(t, Options{})
		m.Add(1, base.KindSet, []byte("k"), []byte("v"))
		ko, kl, _, _, _ := m.entryForTesting([]byte("k"))
		m.arenaForTesting()[ko+kl] = byte(base.KindRangeDelete) // low trailer byte = kind
		if err := m.Validate(); !isCorrupt(err) || !strings.Contains(err.Error(), "kind") {
			t.Fatalf("Validate: %v", err)
		}
		if _, _, _, found, err := m.Get([]byte("k"), base.SeqNumMax); found || !isCorrupt(err) {
			t.Fatalf("Get: %t %v", found, err)
		}
	})
	t.Run("length", func(t *testing.T) {
		// A value length pointing past the arena: every read of the entry
		// reports corruption, with or without paranoid checks. The node's
		// lens word (4 bytes before the key: key length in the top 12 bits,
		// value length in the low 20) keeps the key length and claims the
		// largest value it can, 1 MiB - 1, past this 64 KiB arena's end.
		for _, paranoid := range []bool{false, true} {
			m := mustNew(t, Options{Size: 64 << 10, ParanoidMemoryChecks: paranoid})
			m.Add(1, base.KindSet, []byte("k"), []byte("v"))
			ko, kl, _, _, _ := m.entryForTesting([]byte("k"))
			binary.LittleEndian.PutUint32(m.arenaForTesting()[ko-4:], uint32(kl+base.TrailerLen)<<20|(1<<20-1))
			if _, _, _, found, err := m.Get([]byte("k"), base.SeqNumMax); found || !isCorrupt(err) {
				t.Fatalf("Get: %t %v", found, err)
			}
			if it := m.NewIter(IterOptions{}); it.First() || !isCorrupt(it.Error()) {
				t.Fatalf("First: %v", it.Error())
			}
			if err := m.Validate(); !isCorrupt(err) {
				t.Fatalf("Validate: %v", err)
			}
		}
	})
	t.Run("order", func(t *testing.T) {
		if err := buildOrderCorruption(t, false).Validate(); !isCorrupt(err) {
			t.Fatalf("Validate: %v", err)
		}
	})
}

// TestBitFlipSweep flips every bit of every entry's user key, trailer and
// value in turn and counts how many flips the reads notice: a Get of each
// key, a full iteration, and Validate. With 8 protection bytes every flip
// must be caught; the rates for fewer bytes are reported.
func TestBitFlipSweep(t *testing.T) {
	const entries = 8
	for _, prot := range []int{0, 1, 2, 4, 8} {
		o := Options{ProtectionBytesPerKey: prot}
		if prot > 0 {
			o.ChecksumType = checksum.XXH3
		}
		m := mustNew(t, o)
		keys := make([][]byte, entries)
		for i := range keys {
			keys[i] = []byte(fmt.Sprintf("user-%03d", i*7))
			if err := m.Add(uint64(100+i), base.KindSet, keys[i], []byte(fmt.Sprintf("value-%d-%d", i, i*i))); err != nil {
				t.Fatal(err)
			}
		}
		arena := m.arenaForTesting()
		detected := func() bool {
			for _, k := range keys {
				if _, _, _, _, err := m.Get(k, base.SeqNumMax); err != nil {
					return true
				}
			}
			it := m.NewIter(IterOptions{})
			for ok := it.First(); ok; ok = it.Next() {
			}
			if it.Error() != nil {
				return true
			}
			return m.Validate() != nil
		}
		var ranges [][2]int
		for _, k := range keys {
			ko, kl, vo, vl, ok := m.entryForTesting(k)
			if !ok {
				t.Fatal("entry not found")
			}
			ranges = append(ranges, [2]int{ko, ko + kl + base.TrailerLen}, [2]int{vo, vo + vl})
		}
		flips, caught := 0, 0
		for _, r := range ranges {
			for off := r[0]; off < r[1]; off++ {
				for bit := 0; bit < 8; bit++ {
					arena[off] ^= 1 << bit
					flips++
					if detected() {
						caught++
					}
					arena[off] ^= 1 << bit
				}
			}
		}
		if err := m.Validate(); err != nil {
			t.Fatalf("memtable not restored: %v", err)
		}
		rate := 100 * float64(caught) / float64(flips)
		t.Logf("protection bytes %d: %d of %d single-bit flips detected (%.2f%%)", prot, caught, flips, rate)
		if prot == 8 && caught != flips {
			t.Errorf("protection bytes 8 missed %d flips", flips-caught)
		}
		if prot > 0 && rate < 95 {
			t.Errorf("protection bytes %d caught only %.2f%%", prot, rate)
		}
	}
}

// TestCorruptNeighborStopsInsert: a key flipped upward (out of place but
// compared only with the probe) would steer a new entry to the wrong place,
// where later reads miss it without an error. With protection bytes, an
// insert verifies the two entries it goes between and fails instead.
//
// Under Reverse the list runs k8 ... k0, and k6 -> k2 is the same move: k8,
// k2*, k4, k2, k0; k5 goes between k8 and k2*, in front of k4 again.
func TestCorruptNeighborStopsInsert(t *testing.T) {
	for _, c := range []struct {
		cmp  *base.Comparer
		flip string
	}{{base.DefaultComparer, "k2"}, {testcmp.Reverse, "k6"}} {
		for _, prot := range []int{0, 8} {
			t.Run(fmt.Sprintf("%s/prot=%d", c.cmp.Name, prot), func(t *testing.T) {
				runCorruptNeighborStopsInsert(t, c.cmp, c.flip, prot)
			})
		}
	}
}

func runCorruptNeighborStopsInsert(t *testing.T, cmp *base.Comparer, flip string, prot int) {
	o := Options{ProtectionBytesPerKey: prot, maxHeight: 1, Comparer: cmp}
	if prot > 0 {
		o.ChecksumType = checksum.XXH3
	}
	m := mustNew(t, o)
	for i := 0; i < 10; i += 2 {
		if err := m.Add(uint64(i+1), base.KindSet, []byte(fmt.Sprintf("k%d", i)), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	// Bit 2 of flip's digit: by default k2 -> k6, making k0, k6*, k4, k6,
	// k8 (under Reverse k6 -> k2, making k8, k2*, k4, k2, k0).
	ko, _, _, _, _ := m.entryForTesting([]byte(flip))
	m.arenaForTesting()[ko+1] ^= 0x04
	err := m.Add(20, base.KindSet, []byte("k5"), []byte("new"))
	if prot == 0 {
		// k5 is steered between the first key and the corrupt node,
		// in front of k4, which a Get now misses silently (that is
		// what protection bytes buy).
		if err != nil {
			t.Fatalf("unprotected Add: %v", err)
		}
		if _, _, _, found, err := m.Get([]byte("k4"), base.SeqNumMax); found || err != nil {
			t.Fatalf("expected k4 to be missed silently without protection: found=%v err=%v", found, err)
		}
		return
	}
	if !isCorrupt(err) {
		t.Fatalf("Add next to a corrupt entry: %v, want ErrCorruption", err)
	}
	if n := m.Count(); n != 5 {
		t.Fatalf("count %d after the refused insert, want 5", n)
	}
}
