package memtable

import (
	"errors"
	"fmt"
	"testing"

	"github.com/vigildb/vigil/checksum"
	"github.com/vigildb/vigil/internal/base"
)

// AddChecked inserts an entry whose batch protection agrees with the bytes
// it copied, giving it the memtable's own protection bytes; one that
// disagrees (bytes changed since the batch computed it, or another kind) is
// ErrCorruption and inserted nowhere. Every memtable protection size, every
// batch protection size, every kind.
func TestAddChecked(t *testing.T) {
	kinds := []base.Kind{base.KindSet, base.KindDelete, base.KindRangeDelete}
	for _, mp := range []int{0, 1, 8} {
		for _, n := range []int{1, 2, 4, 8} {
			t.Run(fmt.Sprintf("memtable=%d/batch=%d", mp, n), func(t *testing.T) {
				m := mustNew(t, Options{ChecksumType: checksum.CRC32c, ProtectionBytesPerKey: mp, ParanoidMemoryChecks: true})
				mask := ^uint64(0) >> (64 - 8*n)
				seq := uint64(1)
				for i, kind := range kinds {
					key := []byte(fmt.Sprintf("key%d", i))
					value := []byte(fmt.Sprintf("value-%d", i))
					if kind == base.KindDelete {
						value = nil
					}
					u := checksum.KVUnsequenced(checksum.CRC32c, key, uint8(kind), value) & mask
					// The batch's bytes changed after it protected them.
					flipped := append([]byte(nil), key...)
					flipped[0] ^= 4
					if err := m.AddChecked(seq, kind, flipped, value, u, n); !errors.Is(err, base.ErrCorruption) {
						t.Fatalf("%s with a flipped key: %v, want ErrCorruption", kind, err)
					}
					// Protected as another kind.
					other := checksum.KVUnsequenced(checksum.CRC32c, key, uint8(kinds[(i+1)%3]), value) & mask
					if err := m.AddChecked(seq, kind, key, value, other, n); !errors.Is(err, base.ErrCorruption) {
						t.Fatalf("%s protected as %s: %v, want ErrCorruption", kind, kinds[(i+1)%3], err)
					}
					if m.Count() != uint64(i) {
						t.Fatalf("a refused entry was counted: Count %d", m.Count())
					}
					if err := m.AddChecked(seq, kind, key, value, u, n); err != nil {
						t.Fatalf("%s: %v", kind, err)
					}
					seq++
				}
				if err := m.Validate(); err != nil {
					t.Fatal(err)
				}
				if v, _, kind, found, err := m.Get([]byte("key0"), base.SeqNumMax); err != nil || !found || kind != base.KindSet || string(v) != "value-0" {
					t.Fatalf("Get(key0) = %q %s %v %v", v, kind, found, err)
				}
				if _, _, _, found, err := m.Get([]byte("jey0"), base.SeqNumMax); err != nil || found {
					t.Fatalf("the refused flipped key was inserted: found %v, %v", found, err)
				}
				rd, err := m.RangeDels(base.SeqNumMax)
				if err != nil || len(rd) != 1 || string(rd[0].End) != "value-2" {
					t.Fatalf("RangeDels = %v, %v", rd, err)
				}
			})
		}
	}
}

// With fewer than 8 batch protection bytes, a difference only in the bytes
// the batch did not keep passes (that is the 2^-8N the option trades), and
// the entry's own protection still matches its bytes: the bytes the batch
// did not keep come from the copy.
func TestAddCheckedUnkeptBytes(t *testing.T) {
	m := mustNew(t, Options{ChecksumType: checksum.XXH3, ProtectionBytesPerKey: 8})
	key, value := []byte("k"), []byte("v")
	u := checksum.KVUnsequenced(checksum.XXH3, key, uint8(base.KindSet), value)
	if err := m.AddChecked(7, base.KindSet, key, value, u^1<<40, 4); err != nil {
		t.Fatal(err)
	}
	if err := m.AddChecked(8, base.KindSet, key, value, u^1<<40, 8); !errors.Is(err, base.ErrCorruption) {
		t.Fatalf("a difference in the 6th byte with 8 batch bytes: %v, want ErrCorruption", err)
	}
	if err := m.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{0, 9} {
		if err := m.AddChecked(9, base.KindSet, key, value, u, n); !errors.Is(err, base.ErrInvalidArgument) {
			t.Errorf("AddChecked with %d bytes: %v, want ErrInvalidArgument", n, err)
		}
	}
}
