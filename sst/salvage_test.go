package sst

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/vigildb/vigil/checksum"
	"github.com/vigildb/vigil/internal/base"
)

// salvageBytes runs Salvage over a table held in memory and collects what
// it hands over.
func salvageBytes(t *testing.T, data []byte, o ReaderOptions) ([]kv, *SalvageResult, error) {
	t.Helper()
	var got []kv
	res, err := Salvage(vfs.NewMemFile(data), "t.sst", int64(len(data)), o, func(k InternalKey, v []byte) error {
		got = append(got, kv{k.Clone(), bytes.Clone(v)})
		return nil
	})
	return got, res, err
}

// inLost reports whether user key k lies in a lost block's range.
func inLost(lost []LostBlock, k []byte) bool {
	for _, b := range lost {
		if (b.First == nil || bytes.Compare(k, b.First) >= 0) && bytes.Compare(k, b.Last) <= 0 {
			return true
		}
	}
	return false
}

// TestSalvageIntact: an undamaged table is handed over whole, tombstones
// and properties included.
func TestSalvageIntact(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	spec := genSpec(rng, 600, 12, 40, 5)
	data, m := build(t, testWriterOptions(checksum.XXH3, SnappyCompression, 512), spec)
	got, res, err := salvageBytes(t, data, ReaderOptions{FileNum: 7})
	if err != nil {
		t.Fatal(err)
	}
	if err := equalKVs(got, spec.points); err != nil {
		t.Fatal(err)
	}
	if len(res.Lost) != 0 || res.RangeDelsErr != nil || res.Properties == nil {
		t.Fatalf("lost %v, range dels %v, properties %v", res.Lost, res.RangeDelsErr, res.Properties)
	}
	if len(res.RangeDels) != len(spec.tombs) || res.Entries != m.NumEntries || uint64(res.DataBlocks) != res.Properties.NumDataBlocks {
		t.Fatalf("%d tombstones (want %d), %d entries (want %d), %d blocks", len(res.RangeDels), len(spec.tombs), res.Entries, m.NumEntries, res.DataBlocks)
	}
}

// TestSalvageDamagedDataBlocks flips a byte in each of a few data blocks:
// exactly those blocks are lost, every entry outside their ranges is
// handed over, and nothing handed over differs from what was written.
func TestSalvageDamagedDataBlocks(t *testing.T) {
	for _, ct := range []checksum.Type{checksum.CRC32c, checksum.XXH3, checksum.XXHash64} {
		rng := rand.New(rand.NewPCG(3, uint64(ct)))
		spec := genSpec(rng, 2000, 12, 40, 3)
		data, _ := build(t, testWriterOptions(ct, SnappyCompression, 512), spec)
		r := mustOpen(t, data, ReaderOptions{FileNum: 7})
		var blocks []BlockInfo
		for _, b := range r.Layout() {
			if b.Kind == BlockKindData {
				blocks = append(blocks, b)
			}
		}
		r.Close()
		damaged := map[uint64]bool{}
		bad := bytes.Clone(data)
		for _, i := range []int{0, len(blocks) / 2, len(blocks) - 1} {
			b := blocks[i]
			bad[b.Offset+uint64(rng.IntN(int(b.Size)))] ^= 0x10
			damaged[b.Offset] = true
		}
		got, res, err := salvageBytes(t, bad, ReaderOptions{FileNum: 7})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Lost) != len(damaged) {
			t.Fatalf("%s: %d blocks lost, %d damaged", ct, len(res.Lost), len(damaged))
		}
		for _, lb := range res.Lost {
			if !damaged[lb.Offset] || !errors.Is(lb.Err, ErrCorruption) {
				t.Fatalf("%s: block at %d lost (%v), not damaged", ct, lb.Offset, lb.Err)
			}
		}
		// Every entry handed over is one written; every entry written
		// outside the lost ranges is handed over.
		want := map[string][]byte{}
		for _, e := range spec.points {
			want[string(e.key.Append(nil))] = e.value
		}
		for _, e := range got {
			v, ok := want[string(e.key.Append(nil))]
			if !ok || !bytes.Equal(v, e.value) {
				t.Fatalf("%s: salvaged %s, which was not written", ct, e.key)
			}
		}
		have := map[string]bool{}
		for _, e := range got {
			have[string(e.key.Append(nil))] = true
		}
		for _, e := range spec.points {
			if !have[string(e.key.Append(nil))] && !inLost(res.Lost, e.key.UserKey) {
				t.Fatalf("%s: %s lost outside every reported range", ct, e.key)
			}
		}
		if len(res.RangeDels) != len(spec.tombs) {
			t.Fatalf("%s: %d tombstones salvaged, want %d", ct, len(res.RangeDels), len(spec.tombs))
		}
	}
}

// TestSalvageDamagedMeta: damage in the range-del block is reported (the
// points still come back); damage in the index or footer leaves nothing to
// salvage and is ErrCorruption.
func TestSalvageDamagedMeta(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	spec := genSpec(rng, 500, 12, 40, 4)
	data, _ := build(t, testWriterOptions(checksum.XXH3, NoCompression, 512), spec)
	r := mustOpen(t, data, ReaderOptions{FileNum: 7})
	layout := r.Layout()
	r.Close()
	for _, b := range layout {
		bad := bytes.Clone(data)
		bad[b.Offset+b.Size/2] ^= 0x01
		got, res, err := salvageBytes(t, bad, ReaderOptions{FileNum: 7})
		switch b.Kind {
		case BlockKindFooter, BlockKindIndex:
			if !errors.Is(err, ErrCorruption) {
				t.Fatalf("%s damaged: err %v, want corruption", b.Kind, err)
			}
		case BlockKindRangeDel, BlockKindMetaIndex:
			if err != nil || res.RangeDelsErr == nil || !errors.Is(res.RangeDelsErr, ErrCorruption) || len(got) != len(spec.points) {
				t.Fatalf("%s damaged: err %v, range dels %v, %d of %d points", b.Kind, err, res.RangeDelsErr, len(got), len(spec.points))
			}
		case BlockKindFilter, BlockKindProperties:
			if err != nil || res.RangeDelsErr != nil || len(got) != len(spec.points) {
				t.Fatalf("%s damaged: err %v, range dels %v, %d of %d points", b.Kind, err, res.RangeDelsErr, len(got), len(spec.points))
			}
		case BlockKindData:
			if err != nil || len(res.Lost) != 1 {
				t.Fatalf("data block at %d damaged: err %v, lost %d", b.Offset, err, len(res.Lost))
			}
		}
	}
	// A truncated file: the footer is gone.
	if _, _, err := salvageBytes(t, data[:len(data)-3], ReaderOptions{FileNum: 7}); !errors.Is(err, ErrCorruption) {
		t.Fatalf("truncated: %v", err)
	}
}

// TestSalvageGlobalSeqNum: an external table's entries come back with the
// global seqnum.
func TestSalvageGlobalSeqNum(t *testing.T) {
	o := testWriterOptions(checksum.XXH3, NoCompression, 512)
	o.External = true
	spec := tableSpec{points: []kv{
		{base.MakeInternalKey([]byte("a"), 0, base.KindSet), []byte("1")},
		{base.MakeInternalKey([]byte("b"), 0, base.KindDelete), nil},
	}}
	data, _ := build(t, o, spec)
	got, _, err := salvageBytes(t, data, ReaderOptions{FileNum: 7, GlobalSeqNum: 42})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].key.SeqNum() != 42 || got[1].key.SeqNum() != 42 || got[1].key.Kind() != base.KindDelete {
		t.Fatalf("got %v", got)
	}
}
