package tests

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/vigildb/vigil"
	"github.com/vigildb/vigil/checksum"
)

// encodePairs is the range digest's encoding of a model's pairs in [start,
// end) ("" for unbounded), written independently of the DB: in key order,
// 0x01 ‖ uvarint(len k) ‖ k ‖ uvarint(len v) ‖ v for every pair.
func encodePairs(model map[string]string, start, end string) []byte {
	var keys []string
	for k := range model {
		if (start == "" || k >= start) && (end == "" || k < end) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var buf []byte
	for _, k := range keys {
		buf = append(buf, 0x01)
		buf = binary.AppendUvarint(buf, uint64(len(k)))
		buf = append(buf, k...)
		buf = binary.AppendUvarint(buf, uint64(len(model[k])))
		buf = append(buf, model[k]...)
	}
	return buf
}

// expectedCRC is the model's range digest: the CRC-64/Jones (init 0) of
// encodePairs and its length.
func expectedCRC(model map[string]string, start, end string) (uint64, int64) {
	buf := encodePairs(model, start, end)
	return checksum.UpdateCRC64(0, buf), int64(len(buf))
}

func orNil(s string) []byte {
	if s == "" {
		return nil
	}
	return []byte(s)
}

// Two replicas with the same live data and different LSM shapes (one
// written with overwrites, deletions and range deletions, flushed and
// compacted; one written once, left in its memtable) have equal range
// checksums; digests of adjacent ranges compose; a snapshot's stays put.
func TestRangeChecksumShapeIndependentAndComposable(t *testing.T) {
	a, err := vigil.Open("a", &vigil.Options{FS: vfs.NewMem(), WriteBufferSize: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	rng := rand.New(rand.NewPCG(7, 8))
	model := map[string]string{}
	for i := 0; i < 20000; i++ {
		k := fmt.Sprintf("k%05d", rng.IntN(3000))
		switch rng.IntN(10) {
		case 0:
			if err := a.Delete([]byte(k), nil); err != nil {
				t.Fatal(err)
			}
			delete(model, k)
		case 1:
			e := fmt.Sprintf("k%05d", rng.IntN(3000))
			if err := a.DeleteRange([]byte(k), []byte(e), nil); err != nil && k < e {
				t.Fatal(err)
			}
			for mk := range model {
				if mk >= k && mk < e {
					delete(model, mk)
				}
			}
		default:
			v := fmt.Sprintf("v%d", i)
			if err := a.Put([]byte(k), []byte(v), nil); err != nil {
				t.Fatal(err)
			}
			model[k] = v
		}
		if i == 10000 {
			if err := a.Compact(nil, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	b, err := vigil.Open("b", &vigil.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for k, v := range model {
		if err := b.Put([]byte(k), []byte(v), nil); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range [][2]string{{"", ""}, {"k00100", "k01500"}, {"k02999", ""}, {"z", ""}} {
		ga, err := a.Digest(orNil(r[0]), orNil(r[1]))
		if err != nil {
			t.Fatal(err)
		}
		gb, err := b.Digest(orNil(r[0]), orNil(r[1]))
		if err != nil {
			t.Fatal(err)
		}
		want, n := expectedCRC(model, r[0], r[1])
		if ga != gb || ga.CRC64 != want || ga.Bytes != n {
			t.Fatalf("range %q: replica a %+v, replica b %+v, model %#x (%d bytes)", r, ga, gb, want, n)
		}
	}
	left, _ := a.Digest(nil, []byte("k01234"))
	right, _ := a.Digest([]byte("k01234"), nil)
	whole, _ := a.Digest(nil, nil)
	if left.Append(right) != whole {
		t.Fatalf("composed %+v, whole %+v", left.Append(right), whole)
	}
	snap := a.NewSnapshot()
	defer snap.Close()
	before, _ := snap.Checksum(nil, nil)
	if err := a.Put([]byte("k00001"), []byte("changed"), nil); err != nil {
		t.Fatal(err)
	}
	after, _ := snap.Checksum(nil, nil)
	now, _ := a.Checksum(nil, nil)
	if before != after || before != whole.CRC64 || now == before {
		t.Fatalf("snapshot checksum %#x then %#x, DB now %#x", before, after, now)
	}
}

// openMem opens a fresh DB on an in-memory file system.
func openMem(t *testing.T) *vigil.DB {
	t.Helper()
	db, err := vigil.Open("db", &vigil.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// The digest's encoding is pinned: small DBs with known contents and their
// Digest, as literal constants (computed apart, with a bit-by-bit CRC-64/
// Jones: reflected 0x95ac9329ac4bc9b5, init 0, no final XOR).
func TestRangeChecksumGolden(t *testing.T) {
	z200 := strings.Repeat("\x00", 200)
	for _, tc := range []struct {
		name       string
		kvs        [][2]string
		start, end string
		enc        []byte // the encoding, spelled out
		want       vigil.RangeDigest
	}{
		{"empty", nil, "", "", nil,
			vigil.RangeDigest{}},
		{"empty-pair", [][2]string{{"", ""}}, "", "", []byte{1, 0, 0},
			vigil.RangeDigest{CRC64: 0xf4125129ce4038be, Bytes: 3, Keys: 1}},
		{"abc", [][2]string{{"a", "1"}, {"b", "22"}, {"c", ""}}, "", "",
			[]byte{1, 1, 'a', 1, '1', 1, 1, 'b', 2, '2', '2', 1, 1, 'c', 0},
			vigil.RangeDigest{CRC64: 0x751ced512a5bd8bf, Bytes: 15, Keys: 3}},
		{"abc-from-b", [][2]string{{"a", "1"}, {"b", "22"}, {"c", ""}}, "b", "",
			[]byte{1, 1, 'b', 2, '2', '2', 1, 1, 'c', 0},
			vigil.RangeDigest{CRC64: 0xa9d367947368a5c0, Bytes: 10, Keys: 2}},
		{"empty-pair-and-a", [][2]string{{"", ""}, {"a", "1"}}, "", "",
			[]byte{1, 0, 0, 1, 1, 'a', 1, '1'},
			vigil.RangeDigest{CRC64: 0x17ee426753301a2b, Bytes: 8, Keys: 2}},
		{"zero-key-zero-value", [][2]string{{"\x00", "\x00"}}, "", "",
			[]byte{1, 1, 0, 1, 0},
			vigil.RangeDigest{CRC64: 0x300c121564626171, Bytes: 5, Keys: 1}},
		{"200-zero-key", [][2]string{{z200, "v"}}, "", "",
			append(append([]byte{1, 0xc8, 0x01}, z200...), 1, 'v'),
			vigil.RangeDigest{CRC64: 0xde3a761d7f0cc21f, Bytes: 205, Keys: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := openMem(t)
			model := map[string]string{}
			for _, kv := range tc.kvs {
				if err := db.Put([]byte(kv[0]), []byte(kv[1]), nil); err != nil {
					t.Fatal(err)
				}
				model[kv[0]] = kv[1]
			}
			if enc := encodePairs(model, tc.start, tc.end); !bytes.Equal(enc, tc.enc) {
				t.Fatalf("encoding %x, want %x", enc, tc.enc)
			}
			if crc := checksum.UpdateCRC64(0, tc.enc); crc != tc.want.CRC64 {
				t.Fatalf("CRC-64 of %x is %#x, golden %#x", tc.enc, crc, tc.want.CRC64)
			}
			for _, flush := range []bool{false, true} {
				if flush {
					if err := db.Flush(); err != nil {
						t.Fatal(err)
					}
				}
				g, err := db.Digest(orNil(tc.start), orNil(tc.end))
				if err != nil {
					t.Fatal(err)
				}
				sum, err := db.Checksum(orNil(tc.start), orNil(tc.end))
				if err != nil {
					t.Fatal(err)
				}
				if g != tc.want || sum != tc.want.CRC64 {
					t.Fatalf("flushed=%v: digest %+v, checksum %#x, golden %+v", flush, g, sum, tc.want)
				}
			}
		})
	}
}

// show quotes s with every run of more than 8 zero bytes shortened to
// \x00*N.
func show(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for len(s) > 0 {
		i := strings.IndexByte(s, 0)
		if i < 0 {
			i = len(s)
		}
		j := i
		for j < len(s) && s[j] == 0 {
			j++
		}
		q := strconv.Quote(s[:i])
		b.WriteString(q[1 : len(q)-1])
		if n := j - i; n > 8 {
			fmt.Fprintf(&b, `\x00*%d`, n)
		} else {
			b.WriteString(strings.Repeat(`\x00`, n))
		}
		s = s[j:]
	}
	b.WriteByte('"')
	return b.String()
}

// Adding, removing or changing a single pair always changes the range
// checksum (Checksum alone, not only Digest's counts), however many zero
// bytes the keys and values hold: empty keys and values, keys and values of
// one or many zero bytes, values that look like encoded pairs. Every state
// met has its own checksum, the model's; digests compose across every split
// point, with the empty range as the identity of Append.
func TestRangeChecksumSinglePairChanges(t *testing.T) {
	zeros := func(n int) string { return strings.Repeat("\x00", n) }
	keys := []string{"", "\x00", "\x00\x00", "\x00\x01", zeros(300), "a", "a\x00"}
	values := []string{"", "\x00", "\x00\x00", zeros(200), "x", "\x01\x00\x00", "\x00\x00\x01\x01a\x011"}
	splits := append([]string{"\x00\x00\x00", "b"}, keys...)
	sort.Strings(splits)

	seen := map[uint64]string{} // checksum -> state
	distinct := map[string]bool{}
	describe := func(m map[string]string) string {
		var ks []string
		for k := range m {
			ks = append(ks, k)
		}
		sort.Strings(ks)
		var b strings.Builder
		for _, k := range ks {
			fmt.Fprintf(&b, "%s:%s ", show(k), show(m[k]))
		}
		return "{" + b.String() + "}"
	}
	// check verifies db's digest against the model and its composition,
	// records the state, and returns the checksum.
	check := func(t *testing.T, db *vigil.DB, model map[string]string, composition bool) uint64 {
		t.Helper()
		whole, err := db.Digest(nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		sum, err := db.Checksum(nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		want, n := expectedCRC(model, "", "")
		if whole.CRC64 != want || sum != want || whole.Bytes != n || whole.Keys != int64(len(model)) {
			t.Fatalf("%s: digest %+v, checksum %#x, model %#x over %d bytes", describe(model), whole, sum, want, n)
		}
		desc := describe(model)
		if prev, ok := seen[sum]; ok && prev != desc {
			t.Fatalf("%s and %s have the same checksum %#x", prev, desc, sum)
		}
		seen[sum] = desc
		distinct[desc] = true
		if !composition {
			return sum
		}
		if (vigil.RangeDigest{}).Append(whole) != whole || whole.Append(vigil.RangeDigest{}) != whole {
			t.Fatalf("%s: the empty range is not the identity of Append", desc)
		}
		prev := []byte(nil)
		acc := vigil.RangeDigest{}
		for _, s := range splits {
			left, err1 := db.Digest(nil, []byte(s))
			right, err2 := db.Digest([]byte(s), nil)
			piece, err3 := db.Digest(prev, []byte(s))
			if err1 != nil || err2 != nil || err3 != nil {
				t.Fatal(err1, err2, err3)
			}
			if left.Append(right) != whole {
				t.Fatalf("%s split at %s: composed %+v, whole %+v", desc, show(s), left.Append(right), whole)
			}
			if acc = acc.Append(piece); acc != left {
				t.Fatalf("%s pieces up to %s: composed %+v, direct %+v", desc, show(s), acc, left)
			}
			prev = []byte(s)
		}
		return sum
	}

	// Every state is written once into a fresh DB (flushed to a table for
	// every other state), so that each key has a single version.
	states := 0
	digestOf := func(t *testing.T, model map[string]string, composition bool) uint64 {
		t.Helper()
		db, err := vigil.Open("db", &vigil.Options{FS: vfs.NewMem()})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		for k, v := range model {
			if err := db.Put([]byte(k), []byte(v), nil); err != nil {
				t.Fatal(err)
			}
		}
		if states++; states%2 == 0 {
			if err := db.Flush(); err != nil {
				t.Fatal(err)
			}
		}
		return check(t, db, model, composition)
	}

	rng := rand.New(rand.NewPCG(11, 12))
	var bases []map[string]string
	bases = append(bases, map[string]string{}, map[string]string{"": ""}, map[string]string{"": zeros(200)},
		map[string]string{zeros(300): ""}, map[string]string{"": "", "\x00": "", "\x00\x00": ""})
	for len(bases) < 16 {
		m := map[string]string{}
		for _, k := range keys {
			if rng.IntN(5) < 2 {
				m[k] = values[rng.IntN(len(values))]
			}
		}
		bases = append(bases, m)
	}
	for _, base := range bases {
		baseSum := digestOf(t, base, true)
		for _, k := range keys {
			old, had := base[k]
			var muts []*string // nil: remove k
			if had {
				muts = append(muts, nil)
			}
			for j := range values {
				if !had || values[j] != old {
					muts = append(muts, &values[j]) // add k, or change its value
				}
			}
			for _, mv := range muts {
				model := maps.Clone(base)
				if mv == nil {
					delete(model, k)
				} else {
					model[k] = *mv
				}
				if sum := digestOf(t, model, rng.IntN(3) == 0); sum == baseSum {
					t.Fatalf("%s and %s have the same checksum %#x", describe(base), describe(model), sum)
				}
			}
		}
	}
	if len(seen) != len(distinct) {
		t.Fatalf("%d distinct states, %d distinct checksums", len(distinct), len(seen))
	}
	t.Logf("%d states checked, %d distinct, each with its own checksum", states, len(distinct))
}

// Replicas with the same live pairs and different histories of the empty
// key have the same checksum.
//
// Skipped: Iterator.findNextEntry (iterator.go) takes a nil skip key for
// "nothing to skip", and append(it.keyBuf[:0], k...) is nil for an empty
// key on a fresh iterator, so a forward scan returns every older version of
// the key "" (and one a Delete shadows): Put("", v1), Put("", v2) scans as
// ""=v2, ""=v1. Remove the Skip once that is fixed.
func TestRangeChecksumEmptyKeyHistory(t *testing.T) {
	for _, h := range []struct {
		name    string
		history func(db *vigil.DB) error
		live    map[string]string
	}{
		{"overwritten", func(db *vigil.DB) error {
			return errors.Join(db.Put(nil, []byte("v1"), nil), db.Put(nil, []byte("v2"), nil), db.Put([]byte("a"), []byte("1"), nil))
		}, map[string]string{"": "v2", "a": "1"}},
		{"deleted", func(db *vigil.DB) error {
			return errors.Join(db.Put(nil, []byte("v1"), nil), db.Delete(nil, nil), db.Put([]byte("a"), []byte("1"), nil))
		}, map[string]string{"a": "1"}},
		{"deleted-flushed", func(db *vigil.DB) error {
			return errors.Join(db.Put(nil, []byte("v1"), nil), db.Flush(), db.Delete(nil, nil), db.Put([]byte("a"), []byte("1"), nil))
		}, map[string]string{"a": "1"}},
	} {
		t.Run(h.name, func(t *testing.T) {
			a, b := openMem(t), openMem(t)
			if err := h.history(a); err != nil {
				t.Fatal(err)
			}
			for k, v := range h.live {
				if err := b.Put([]byte(k), []byte(v), nil); err != nil {
					t.Fatal(err)
				}
			}
			ga, err1 := a.Digest(nil, nil)
			gb, err2 := b.Digest(nil, nil)
			want, n := expectedCRC(h.live, "", "")
			if err1 != nil || err2 != nil || ga != gb || ga.CRC64 != want || ga.Bytes != n {
				t.Fatalf("replica with history %+v (%v), written once %+v (%v), model %#x over %d bytes", ga, err1, gb, err2, want, n)
			}
		})
	}
}
