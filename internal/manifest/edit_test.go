package manifest

import (
	"encoding/hex"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/vigildb/vigil/checksum"
	"github.com/vigildb/vigil/internal/base"
)

func sampleEdit() *VersionEdit {
	e := &VersionEdit{Comparer: ComparerName}
	e.SetLogNumber(5)
	e.SetNextFileNum(9)
	e.SetLastSeq(300)
	e.Deleted = append(e.Deleted, DeletedFile{Level: 1, FileNum: 3})
	e.Added = append(e.Added, NewFile{Level: 2, Meta: &FileMetadata{
		FileNum: 8, Size: 4096,
		Smallest:    base.MakeInternalKey([]byte("a"), 10, base.KindSet),
		Largest:     base.MakeInternalKey([]byte("z"), base.SeqNumMax, base.KindRangeDelete),
		SmallestSeq: 10, LargestSeq: 290, NumEntries: 100, NumDeletions: 2, NumRangeDels: 1,
		FileChecksum: 0x1122334455667788, ChecksumType: checksum.XXH3,
	}})
	return e
}

// TestVersionEditGolden pins the MANIFEST record layout.
func TestVersionEditGolden(t *testing.T) {
	got := hex.EncodeToString(sampleEdit().Encode(nil))
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
	d, err := DecodeVersionEdit(e.Encode(nil), "test")
	if err != nil {
		t.Fatal(err)
	}
	// Compare the exported-equivalent fields (refs are atomics).
	if d.LogNumber != e.LogNumber || d.NextFileNum != e.NextFileNum || d.LastSeq != e.LastSeq ||
		!reflect.DeepEqual(d.Deleted, e.Deleted) || len(d.Added) != 1 || d.Comparer != ComparerName {
		t.Fatalf("round trip: %+v", d)
	}
	a, b := d.Added[0].Meta, e.Added[0].Meta
	if a.FileNum != b.FileNum || a.Size != b.Size || base.CompareInternal(a.Smallest, b.Smallest) != 0 ||
		base.CompareInternal(a.Largest, b.Largest) != 0 || a.NumEntries != b.NumEntries || a.FileChecksum != b.FileChecksum ||
		a.ChecksumType != b.ChecksumType || a.NumRangeDels != b.NumRangeDels || !a.LargestIsExclusive() {
		t.Fatalf("file meta round trip: %+v vs %+v", a, b)
	}
}

func TestVersionEditRejectsEveryTruncation(t *testing.T) {
	enc := sampleEdit().Encode(nil)
	for n := 1; n < len(enc); n++ {
		if _, err := DecodeVersionEdit(enc[:n], "test"); err == nil {
			// A truncation that lands exactly between fields decodes fine.
			continue
		} else if !errors.Is(err, base.ErrCorruption) {
			t.Fatalf("truncation at %d: %v is not corruption", n, err)
		}
	}
	bad := append([]byte{}, enc...)
	bad[0] = 99
	if _, err := DecodeVersionEdit(bad, "test"); !errors.Is(err, base.ErrCorruption) {
		t.Fatalf("unknown tag: %v", err)
	}
}

// FuzzVersionEdit: arbitrary MANIFEST records never panic; whatever decodes
// re-encodes and decodes to the same edit.
func FuzzVersionEdit(f *testing.F) {
	f.Add(sampleEdit().Encode(nil))
	f.Add([]byte{})
	f.Add([]byte{5, 0, 1, 2, 3})
	f.Add(ingestedEdit().Encode(nil))
	f.Add(identityEdit(0).Encode(nil))
	f.Add(identityEdit(500).Encode(nil))
	f.Add((&VersionEdit{FormatVersion: FormatVersion, Comparer: ComparerName}).Encode(nil))
	f.Add([]byte{0x0a, FormatVersion + 1, 0x7f})
	f.Fuzz(func(t *testing.T, data []byte) {
		e, err := DecodeVersionEdit(data, "fuzz")
		if err != nil {
			// A newer format version is the one refusal that is not
			// damage.
			if !errors.Is(err, base.ErrCorruption) && !(errors.Is(err, base.ErrInvalidArgument) && strings.Contains(err.Error(), "newer than this build's")) {
				t.Fatalf("neither corruption nor a newer format: %v", err)
			}
			return
		}
		e2, err := DecodeVersionEdit(e.Encode(nil), "fuzz")
		if err != nil {
			t.Fatalf("re-decoding: %v", err)
		}
		if string(e2.Encode(nil)) != string(e.Encode(nil)) {
			t.Fatal("encoding not stable")
		}
	})
}

func ingestedEdit() *VersionEdit {
	e := &VersionEdit{}
	e.Added = append(e.Added, NewFile{Level: 6, Meta: &FileMetadata{
		FileNum: 12, Size: 300,
		Smallest:    base.MakeInternalKey([]byte("b"), 500, base.KindSet),
		Largest:     base.MakeInternalKey([]byte("d"), base.SeqNumMax, base.KindRangeDelete),
		SmallestSeq: 500, LargestSeq: 500, NumEntries: 3, NumDeletions: 1, NumRangeDels: 1,
		FileChecksum: 0x0102030405060708, ChecksumType: checksum.CRC32c, GlobalSeqNum: 500,
	}})
	return e
}

// TestVersionEditGlobalSeqGolden pins the encoding of an ingested table:
// tag 7, the fields of tag 5, then the global seqnum. A table without one
// is still tag 5 (TestVersionEditGolden).
func TestVersionEditGlobalSeqGolden(t *testing.T) {
	got := hex.EncodeToString(ingestedEdit().Encode(nil))
	const want = "07" + "06" + "0c" + "ac02" + // ingested file L6 #12, 300 bytes
		"09" + "62" + "01f4010000000000" + // smallest b#500,SET
		"09" + "64" + "0fffffffffffffff" + // largest d#max,RANGEDEL
		"f403" + "f403" + "03" + "01" + "01" + // seqs 500..500, 3 entries, 1 del, 1 rangedel
		"0807060504030201" + "01" + // file checksum, crc32c
		"f403" // global seqnum 500
	if got != want {
		t.Fatalf("version edit encoding changed:\n got %s\nwant %s", got, want)
	}
	d, err := DecodeVersionEdit(ingestedEdit().Encode(nil), "test")
	if err != nil {
		t.Fatal(err)
	}
	if m := d.Added[0].Meta; m.GlobalSeqNum != 500 || m.SmallestSeq != 500 || d.Added[0].Level != 6 {
		t.Fatalf("round trip: %+v", m)
	}
	if string(d.Encode(nil)) != string(ingestedEdit().Encode(nil)) {
		t.Fatal("re-encoding differs")
	}
}

// The decoder refuses a global seqnum that does not match the file's
// seqnums and bounds, or is 0.
func TestVersionEditGlobalSeqChecks(t *testing.T) {
	for name, mod := range map[string]func(m *FileMetadata){
		"seqnums": func(m *FileMetadata) { m.LargestSeq = 501 },
		"bounds":  func(m *FileMetadata) { m.Smallest = base.MakeInternalKey([]byte("b"), 499, base.KindSet) },
		"largest": func(m *FileMetadata) { m.Largest = base.MakeInternalKey([]byte("d"), 3, base.KindSet) },
	} {
		e := ingestedEdit()
		mod(e.Added[0].Meta)
		if _, err := DecodeVersionEdit(e.Encode(nil), "test"); !errors.Is(err, base.ErrCorruption) {
			t.Errorf("%s: %v", name, err)
		}
	}
	enc := ingestedEdit().Encode(nil)
	enc[len(enc)-2], enc = 0, enc[:len(enc)-1] // global seqnum 0
	if _, err := DecodeVersionEdit(enc, "test"); !errors.Is(err, base.ErrCorruption) {
		t.Errorf("global seqnum 0: %v", err)
	}
	full := ingestedEdit().Encode(nil)
	for n := 1; n < len(full); n++ {
		if _, err := DecodeVersionEdit(full[:n], "test"); err == nil {
			t.Fatalf("truncation at %d of a one-file edit decodes", n)
		} else if !errors.Is(err, base.ErrCorruption) {
			t.Fatalf("truncation at %d: %v", n, err)
		}
	}
}

var (
	testDBID    = [16]byte{0xdb, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}
	testSession = [16]byte{0x5e, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}
)

// identityEdit is an edit with the DB's id and one table with an identity,
// ingested at global seqnum gs unless gs is 0.
func identityEdit(gs uint64) *VersionEdit {
	e := ingestedEdit()
	e.SetDBID(testDBID)
	m := e.Added[0].Meta
	m.Identity = base.TableIdentity{DB: testDBID, Session: testSession, FileNum: 12}
	if gs == 0 {
		m.GlobalSeqNum = 0
	}
	return e
}

// TestVersionEditIdentityGolden pins tag 9 (the DB's id) and tag 8 (a new
// file with its identity, and a global seqnum that is 0 or not).
func TestVersionEditIdentityGolden(t *testing.T) {
	const id = "db0102030405060708090a0b0c0d0e0f" + "5e0102030405060708090a0b0c0d0e0f" + "000000000000000c"
	for gs, tail := range map[uint64]string{0: "00", 500: "f403"} {
		got := hex.EncodeToString(identityEdit(gs).Encode(nil))
		want := "09" + "db0102030405060708090a0b0c0d0e0f" + // DB id
			"08" + "06" + "0c" + "ac02" + // file L6 #12, 300 bytes, with identity
			"09" + "62" + "01f4010000000000" + // smallest b#500,SET
			"09" + "64" + "0fffffffffffffff" + // largest d#max,RANGEDEL
			"f403" + "f403" + "03" + "01" + "01" + // seqs 500..500, 3 entries, 1 del, 1 rangedel
			"0807060504030201" + "01" + // file checksum, crc32c
			tail + id // global seqnum (0: none), identity
		if got != want {
			t.Fatalf("gs=%d: version edit encoding changed:\n got %s\nwant %s", gs, got, want)
		}
		d, err := DecodeVersionEdit(identityEdit(gs).Encode(nil), "test")
		if err != nil {
			t.Fatal(err)
		}
		m := d.Added[0].Meta
		if !d.HasDBID || d.DBID != testDBID || m.Identity != identityEdit(gs).Added[0].Meta.Identity || m.GlobalSeqNum != gs {
			t.Fatalf("gs=%d: round trip: %+v, %+v", gs, d, m)
		}
		if string(d.Encode(nil)) != string(identityEdit(gs).Encode(nil)) {
			t.Fatalf("gs=%d: re-encoding differs", gs)
		}
		full := identityEdit(gs).Encode(nil)
		for n := 1; n < len(full); n++ {
			if _, err := DecodeVersionEdit(full[:n], "test"); err == nil && n != 17 {
				t.Fatalf("gs=%d: truncation at %d decodes", gs, n)
			} else if err != nil && !errors.Is(err, base.ErrCorruption) {
				t.Fatalf("gs=%d: truncation at %d: %v", gs, n, err)
			}
		}
	}
	// A zero identity under tag 8 is damage.
	enc := identityEdit(0).Encode(nil)
	clear(enc[len(enc)-base.TableIdentityLen:])
	if _, err := DecodeVersionEdit(enc, "test"); !errors.Is(err, base.ErrCorruption) {
		t.Fatalf("zero identity: %v", err)
	}
}

// TestFormatVersionField pins the format-version field (tag 10, first) and
// checks that a version newer than this build's is refused as soon as it
// is read, before fields this build may not know, as ErrInvalidArgument
// naming both versions; version 0 is corruption.
func TestFormatVersionField(t *testing.T) {
	e := &VersionEdit{FormatVersion: 1, Comparer: ComparerName}
	if got, want := hex.EncodeToString(e.Encode(nil)), "0a01"+"06"+"08"+"6279746577697365"; got != want {
		t.Fatalf("encoding %s, want %s", got, want)
	}
	d, err := DecodeVersionEdit(e.Encode(nil), "test")
	if err != nil || d.FormatVersion != 1 {
		t.Fatalf("decode: %+v, %v", d, err)
	}
	newer := append([]byte{0x0a, FormatVersion + 1}, 0x7f, 0x01) // then an unknown tag 127
	_, err = DecodeVersionEdit(newer, "MANIFEST-000001")
	if !errors.Is(err, base.ErrInvalidArgument) || !strings.Contains(err.Error(), fmt.Sprintf("format version is %d, newer than this build's %d", FormatVersion+1, FormatVersion)) {
		t.Fatalf("a newer format version: %v", err)
	}
	if _, err := DecodeVersionEdit([]byte{0x0a, 0x00}, "test"); !errors.Is(err, base.ErrCorruption) {
		t.Fatalf("format version 0: %v", err)
	}
}

// TestMergerFieldGolden pins the merger field (tag 11, after the
// comparer's) and its round trip; an empty name is corruption.
func TestMergerFieldGolden(t *testing.T) {
	e := &VersionEdit{FormatVersion: FormatVersionMerges, Comparer: ComparerName, Merger: "uint64add"}
	got := hex.EncodeToString(e.Encode(nil))
	const want = "0a" + "02" + // format version 2
		"06" + "08" + "6279746577697365" + // comparer "bytewise"
		"0b" + "09" + "75696e7436346164" + "64" // merger "uint64add"
	if got != want {
		t.Fatalf("merger field encoding changed:\n got %s\nwant %s", got, want)
	}
	d, err := DecodeVersionEdit(e.Encode(nil), "test")
	if err != nil || d.Merger != "uint64add" || d.FormatVersion != 2 {
		t.Fatalf("round trip: %+v, %v", d, err)
	}
	if _, err := DecodeVersionEdit([]byte{0x0b, 0x00}, "test"); !errors.Is(err, base.ErrCorruption) {
		t.Fatalf("empty merger name: %v", err)
	}
}
