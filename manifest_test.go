package vigil

import (
	"encoding/hex"
	"errors"
	"reflect"
	"testing"

	"github.com/vigildb/vigil/checksum"
	"github.com/vigildb/vigil/internal/base"
)

func sampleEdit() *versionEdit {
	e := &versionEdit{comparer: comparerName}
	e.setLogNumber(5)
	e.setNextFileNum(9)
	e.setLastSeq(300)
	e.deleted = append(e.deleted, deletedFileEntry{level: 1, fileNum: 3})
	e.added = append(e.added, newFileEntry{level: 2, meta: &fileMetadata{
		fileNum: 8, size: 4096,
		smallest:    base.MakeInternalKey([]byte("a"), 10, base.KindSet),
		largest:     base.MakeInternalKey([]byte("z"), base.SeqNumMax, base.KindRangeDelete),
		smallestSeq: 10, largestSeq: 290, numEntries: 100, numDeletions: 2, numRangeDels: 1,
		fileChecksum: 0x1122334455667788, checksumType: checksum.XXH3,
	}})
	return e
}

// TestVersionEditGolden pins the MANIFEST record layout.
func TestVersionEditGolden(t *testing.T) {
	got := hex.EncodeToString(sampleEdit().encode(nil))
	const want = "06" + "08" + "6279746577697365" + // comparer "bytewise"
		"01" + "05" + "02" + "09" + "03" + "ac02" + // log 5, next file 9, last seq 300
		"04" + "01" + "03" + // deleted L1 #3
		"05" + "02" + "08" + "8020" + // new file L2 #8, 4096 bytes
		"09" + "61" + "010a000000000000" + // smallest a#10,SET
		"09" + "7a" + "0fffffffffffffff" + // largest z#max,RANGEDEL
		"0a" + "a202" + "64" + "02" + "01" + // seqs 10..290, 100 entries, 2 dels, 1 rangedel
		"8877665544332211" + "04" // file checksum, xxh3
	if got != want {
		t.Fatalf("version edit encoding changed:\n got %s\nwant %s", got, want)
	}
}

func TestVersionEditRoundTrip(t *testing.T) {
	e := sampleEdit()
	d, err := decodeVersionEdit(e.encode(nil), "test")
	if err != nil {
		t.Fatal(err)
	}
	// Compare the exported-equivalent fields (refs are atomics).
	if d.logNumber != e.logNumber || d.nextFileNum != e.nextFileNum || d.lastSeq != e.lastSeq ||
		!reflect.DeepEqual(d.deleted, e.deleted) || len(d.added) != 1 || d.comparer != comparerName {
		t.Fatalf("round trip: %+v", d)
	}
	a, b := d.added[0].meta, e.added[0].meta
	if a.fileNum != b.fileNum || a.size != b.size || base.CompareInternal(a.smallest, b.smallest) != 0 ||
		base.CompareInternal(a.largest, b.largest) != 0 || a.numEntries != b.numEntries || a.fileChecksum != b.fileChecksum ||
		a.checksumType != b.checksumType || a.numRangeDels != b.numRangeDels || !a.largestIsExclusive() {
		t.Fatalf("file meta round trip: %+v vs %+v", a, b)
	}
}

func TestVersionEditRejectsEveryTruncation(t *testing.T) {
	enc := sampleEdit().encode(nil)
	for n := 1; n < len(enc); n++ {
		if _, err := decodeVersionEdit(enc[:n], "test"); err == nil {
			// A truncation that lands exactly between fields decodes fine.
			continue
		} else if !errors.Is(err, ErrCorruption) {
			t.Fatalf("truncation at %d: %v is not corruption", n, err)
		}
	}
	bad := append([]byte{}, enc...)
	bad[0] = 99
	if _, err := decodeVersionEdit(bad, "test"); !errors.Is(err, ErrCorruption) {
		t.Fatalf("unknown tag: %v", err)
	}
}

// FuzzVersionEdit: arbitrary MANIFEST records never panic; whatever decodes
// re-encodes and decodes to the same edit.
func FuzzVersionEdit(f *testing.F) {
	f.Add(sampleEdit().encode(nil))
	f.Add([]byte{})
	f.Add([]byte{5, 0, 1, 2, 3})
	f.Fuzz(func(t *testing.T, data []byte) {
		e, err := decodeVersionEdit(data, "fuzz")
		if err != nil {
			if !errors.Is(err, ErrCorruption) {
				t.Fatalf("not corruption: %v", err)
			}
			return
		}
		e2, err := decodeVersionEdit(e.encode(nil), "fuzz")
		if err != nil {
			t.Fatalf("re-decoding: %v", err)
		}
		if string(e2.encode(nil)) != string(e.encode(nil)) {
			t.Fatal("encoding not stable")
		}
	})
}
