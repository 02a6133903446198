package tests

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/vigildb/vigil"
	"github.com/vigildb/vigil/checksum"
)

// expectedCRC is the range digest computed from a model, independently of
// the DB: CRC-64 of uvarint(len k) k uvarint(len v) v, in key order.
func expectedCRC(model map[string]string, start, end string) (uint64, int64) {
	var keys []string
	for k := range model {
		if (start == "" || k >= start) && (end == "" || k < end) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var buf []byte
	for _, k := range keys {
		buf = binary.AppendUvarint(buf, uint64(len(k)))
		buf = append(buf, k...)
		buf = binary.AppendUvarint(buf, uint64(len(model[k])))
		buf = append(buf, model[k]...)
	}
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

// The digest's encoding is pinned.
func TestRangeChecksumGolden(t *testing.T) {
	db, err := vigil.Open("db", &vigil.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, kv := range [][2]string{{"a", "1"}, {"b", "22"}, {"c", ""}} {
		if err := db.Put([]byte(kv[0]), []byte(kv[1]), nil); err != nil {
			t.Fatal(err)
		}
	}
	g, err := db.Digest(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	// CRC-64/Jones (Valkey's crc64, init 0) of 01 61 01 31 01 62 02 32 32 01 63 00.
	want := checksum.UpdateCRC64(0, []byte{1, 'a', 1, '1', 1, 'b', 2, '2', '2', 1, 'c', 0})
	if g.CRC64 != want || g.Bytes != 12 || g.Keys != 3 {
		t.Fatalf("digest %+v, want CRC %#x over 12 bytes, 3 keys", g, want)
	}
	if g.CRC64 != 0x70eadf46408318c3 {
		t.Fatalf("digest CRC %#x, golden 0x70eadf46408318c3", g.CRC64)
	}
}
