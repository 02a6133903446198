package sst

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/vigildb/vigil/checksum"
	"github.com/vigildb/vigil/internal/base"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// goldenSpec is the content of the golden tables: fixed, small, several
// versions per key, deletions and two range tombstones.
func goldenSpec() tableSpec {
	var s tableSpec
	for i := 0; i < 40; i++ {
		uk := []byte(fmt.Sprintf("key%03d", i*7))
		for v := 0; v < 1+i%3; v++ {
			seq := uint64(1000 - 10*i - v)
			kind := base.KindSet
			var val []byte
			if (i+v)%5 == 4 {
				kind = base.KindDelete
			} else {
				val = []byte(strings.Repeat(fmt.Sprintf("value-%d-%d;", i, v), 1+i%4))
			}
			s.points = append(s.points, kv{base.MakeInternalKey(uk, seq, kind), val})
		}
	}
	s.tombs = []base.RangeTombstone{
		{Start: []byte("key050"), End: []byte("key100"), Seq: 990},
		{Start: []byte("key200"), End: []byte("key201"), Seq: 500},
	}
	return s
}

func goldenOptions(ct checksum.Type, c Compression) WriterOptions {
	o := testWriterOptions(ct, c, 256)
	o.BlockRestartInterval = 4
	return o
}

// TestGolden pins the format: each golden table, rebuilt from goldenSpec
// with fixed options (base context and creation time included), must equal
// the committed file byte for byte, and the committed file must read back
// to goldenSpec. Run with -update to rewrite them after a deliberate format
// change (and bump FormatVersion).
func TestGolden(t *testing.T) {
	spec := goldenSpec()
	for ct := checksum.None; ct < checksum.NumTypes; ct++ { // the stored types
		for _, c := range []Compression{NoCompression, SnappyCompression} {
			name := fmt.Sprintf("testdata/golden-%s-%s.sst", ct, c)
			t.Run(name, func(t *testing.T) {
				o := goldenOptions(ct, c)
				data, m := build(t, o, spec)
				if *update {
					writeTestdata(t, name, data)
				}
				want := readFile(t, vfs.Default, name)
				if !bytes.Equal(data, want) {
					t.Fatalf("rebuilt table differs from %s (%d vs %d bytes): the on-disk format changed", name, len(data), len(want))
				}
				checkTable(t, want, m, spec, o, ReaderOptions{})
			})
		}
	}
	// Zero options mean the defaults: the XXH3, Snappy table, byte for byte.
	data := readFile(t, vfs.Default, "testdata/golden-xxh3-snappy.sst")
	if built, _ := build(t, goldenOptions(checksum.Default, DefaultCompression), spec); !bytes.Equal(built, data) {
		t.Fatal("a table written with the default checksum type and compression differs from golden-xxh3-snappy.sst")
	}
	// A table with an identity: the optional property is pinned too, and
	// reads back as written; Open with Expect accepts it and refuses a
	// table of any other identity, size or whole-file checksum.
	id := Identity{DB: [16]byte{0xdb, 1, 2, 3}, Session: [16]byte{0x5e, 4, 5, 6}, FileNum: 7}
	o := goldenOptions(checksum.Default, DefaultCompression)
	o.Identity = id
	withID, m := build(t, o, spec)
	const idName = "testdata/golden-xxh3-snappy-identity.sst"
	if *update {
		writeTestdata(t, idName, withID)
	}
	if want := readFile(t, vfs.Default, idName); !bytes.Equal(withID, want) {
		t.Fatalf("rebuilt table differs from %s: the on-disk format changed", idName)
	}
	if m.Identity != id {
		t.Fatalf("Meta.Identity = %v, want %v", m.Identity, id)
	}
	want := Expected{Size: m.Size, Identity: id, FileChecksum: m.FileChecksum, ChecksumType: m.ChecksumType}
	r := mustOpen(t, withID, ReaderOptions{FileNum: 7, Expect: &want})
	if got := r.Properties().Identity; got != id {
		t.Fatalf("Properties().Identity = %v, want %v", got, id)
	}
	r.Close()
	for _, bad := range []func(e *Expected){
		func(e *Expected) { e.Identity.FileNum = 8 },
		func(e *Expected) { e.Identity.DB[15] ^= 1 },
		func(e *Expected) { e.Identity.Session[0] ^= 1 },
		func(e *Expected) { e.Identity = Identity{} },
		func(e *Expected) { e.Size++ },
		func(e *Expected) { e.FileChecksum ^= 1 },
	} {
		e := want
		bad(&e)
		if r, err := openBytes(withID, ReaderOptions{Expect: &e}); !errors.Is(err, base.ErrCorruption) {
			if err == nil {
				r.Close()
			}
			t.Fatalf("Open expecting %+v = %v, want ErrCorruption", e, err)
		}
	}

	// A readable rendering of one golden table (layout and properties), so
	// a reviewer sees what a format change changed, and Properties.String
	// is pinned too.
	r = mustOpen(t, data, ReaderOptions{FileNum: 7})
	defer r.Close()
	var b strings.Builder
	for _, blk := range r.Layout() {
		fmt.Fprintf(&b, "%-10s offset %5d size %5d", blk.Kind, blk.Offset, blk.Size)
		if blk.Kind == BlockKindData {
			fmt.Fprintf(&b, " index key %s", blk.IndexKey)
		}
		b.WriteString("\n")
	}
	b.WriteString(r.Properties().String())
	const name = "testdata/golden-xxh3-snappy.txt"
	if *update {
		writeTestdata(t, name, []byte(b.String()))
	}
	if want := string(readFile(t, vfs.Default, name)); b.String() != want {
		t.Fatalf("layout/properties of the golden table changed:\n%s\nwant:\n%s", b.String(), want)
	}
}

func writeTestdata(t *testing.T, name string, data []byte) {
	f, err := vfs.Default.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// region names the part of the file an offset falls in, for the bit-flip
// report: a block kind, its trailer, or a footer field.
func region(layout []BlockInfo, off uint64) string {
	for _, b := range layout {
		if off < b.Offset || off >= b.Offset+b.Size+b.TrailerLen() {
			continue
		}
		if b.Kind == BlockKindFooter {
			switch rel := off - b.Offset; {
			case rel < 1:
				return "footer checksum type"
			case rel < 5:
				return "footer version"
			case rel < 9:
				return "footer base context"
			case rel < 41:
				return "footer handles"
			case rel < 45:
				return "footer checksum"
			default:
				return "footer magic"
			}
		}
		if off >= b.Offset+b.Size {
			return b.Kind.String() + " trailer"
		}
		return b.Kind.String()
	}
	return "outside"
}

// readsBack reports whether a (possibly corrupted) table, which opened and
// verified, still returns exactly spec's contents.
func readsBack(r *Reader, spec tableSpec) bool {
	it := r.NewIter(nil, nil)
	defer it.Close()
	i := 0
	for ok := it.First(); ok; ok = it.Next() {
		if i >= len(spec.points) || it.Key().Trailer != spec.points[i].key.Trailer ||
			!bytes.Equal(it.Key().UserKey, spec.points[i].key.UserKey) || !bytes.Equal(it.Value(), spec.points[i].value) {
			return false
		}
		i++
	}
	if it.Error() != nil || i != len(spec.points) {
		return false
	}
	for _, e := range spec.points {
		v, seq, kind, found, err := r.Get(e.key.UserKey, base.SeqNumMax)
		w, _ := modelGet(spec.points, e.key.UserKey, base.SeqNumMax)
		if err != nil || !found || seq != w.key.SeqNum() || kind != w.key.Kind() || !bytes.Equal(v, w.value) {
			return false
		}
	}
	rd := r.RangeDels()
	if len(rd) != len(spec.tombs) {
		return false
	}
	for i := range rd {
		if !bytes.Equal(rd[i].Start, spec.tombs[i].Start) || !bytes.Equal(rd[i].End, spec.tombs[i].End) || rd[i].Seq != spec.tombs[i].Seq {
			return false
		}
	}
	return true
}

// TestEveryBitFlipIsDetected flips each bit of a small table in turn. Every
// flip must be reported as corruption by Open or Verify: each byte of the
// file lies in a block covered by its trailer checksum or in the
// checksummed footer (the magic is compared exactly), and the reader checks
// that the blocks tile the file, so no byte is unprotected. A flip that goes
// unreported but leaves the contents intact would be "harmless"; the test
// reports any, per region, and fails on any flip that changes what the table
// returns without an error. With 32-bit checksums an undetected flip has a
// probability of about 2^-32 per flip, and CRC32c and CRC64 detect every
// single-bit error outright.
func TestEveryBitFlipIsDetected(t *testing.T) {
	spec := goldenSpec()
	spec.points = spec.points[:30]
	types := []checksum.Type{checksum.CRC32c, checksum.XXHash, checksum.XXHash64, checksum.XXH3, checksum.CRC64}
	stride := 1
	switch {
	case testing.Short():
		// Every 7th bit still hits every bit position over 7 bytes and
		// every region.
		types, stride = []checksum.Type{checksum.XXH3, checksum.CRC32c}, 7
	case raceEnabled:
		// Single-goroutine code: the race detector adds nothing but time.
		stride = 13
	}
	for _, ct := range types {
		for _, c := range []Compression{NoCompression, SnappyCompression, ZstdCompression} {
			o := goldenOptions(ct, c)
			data, _ := build(t, o, spec)
			r := mustOpen(t, data, ReaderOptions{})
			layout := r.Layout()
			r.Close()
			detected := map[string]int{}
			harmless := map[string]int{}
			corrupt := bytes.Clone(data)
			for bit := 0; bit < 8*len(data); bit += stride {
				byteIdx, mask := bit/8, byte(1)<<(bit%8)
				corrupt[byteIdx] ^= mask
				reg := region(layout, uint64(byteIdx))
				r, err := openBytes(corrupt, ReaderOptions{})
				if err == nil {
					err = r.Verify()
					if err == nil {
						if !readsBack(r, spec) {
							t.Fatalf("%s/%s: flip of bit %d (byte %d, %s) silently changed the table", ct, c, bit%8, byteIdx, reg)
						}
						harmless[reg]++
					}
					r.Close()
				}
				if err != nil {
					if !errors.Is(err, base.ErrCorruption) {
						t.Fatalf("%s/%s: flip at byte %d (%s): error not marked as corruption: %v", ct, c, byteIdx, reg, err)
					}
					detected[reg]++
				}
				corrupt[byteIdx] ^= mask
			}
			var regs []string
			for reg := range detected {
				regs = append(regs, reg)
			}
			for reg := range harmless {
				if detected[reg] == 0 {
					regs = append(regs, reg)
				}
			}
			sort.Strings(regs)
			var report strings.Builder
			for _, reg := range regs {
				fmt.Fprintf(&report, " %s=%d/%d", reg, detected[reg], detected[reg]+harmless[reg])
			}
			t.Logf("%s/%s, %d bytes: detected/flipped per region:%s", ct, c, len(data), report.String())
			for reg, n := range harmless {
				t.Errorf("%s/%s: %d flips in %s went undetected (contents intact); every region is checksummed", ct, c, n, reg)
			}
		}
	}
}

// fixedSpec has entries of identical size, so that with no compression and
// restart interval 1 every full data block has the same size.
func fixedSpec(n int) tableSpec {
	var s tableSpec
	for i := 0; i < n; i++ {
		s.points = append(s.points, kv{base.MakeInternalKey([]byte(fmt.Sprintf("key%05d", i)), 100, base.KindSet), []byte(fmt.Sprintf("val%05d", i))})
	}
	return s
}

// TestMisplacedBlockIsDetected copies a data block over another of the same
// size, from the same file and from another file with the same contents:
// intact bytes in the wrong place must fail the check (the context modifier).
func TestMisplacedBlockIsDetected(t *testing.T) {
	spec := fixedSpec(200)
	o := testWriterOptions(checksum.XXH3, NoCompression, 200)
	data, _ := build(t, o, spec)
	o2 := o
	o2.BaseContext = 0x0badf00d
	other, _ := build(t, o2, spec)
	r := mustOpen(t, data, ReaderOptions{})
	layout := r.Layout()
	r.Close()
	b1, b2 := layout[1], layout[2]
	if b1.Kind != BlockKindData || b2.Kind != BlockKindData || b1.Size != b2.Size {
		t.Fatalf("blocks 1 and 2 differ in size: %+v %+v", b1, b2)
	}
	n := b1.Size + BlockTrailerLen
	check := func(name string, corrupt []byte) {
		r, err := openBytes(corrupt, ReaderOptions{})
		if err != nil {
			t.Fatalf("%s: Open: %v (the index is intact, Open should succeed)", name, err)
		}
		defer r.Close()
		err = r.Verify()
		if !errors.Is(err, base.ErrCorruption) || !strings.Contains(err.Error(), fmt.Sprintf("offset %d size %d, block kind = data", b1.Offset, b1.Size)) {
			t.Fatalf("%s: Verify = %v", name, err)
		}
		t.Logf("%s: %v", name, err)
		// A point read of a key in the block fails the same way.
		it := r.NewIter(nil, nil)
		defer it.Close()
		for ok := it.First(); ok; ok = it.Next() {
		}
		if !errors.Is(it.Error(), base.ErrCorruption) {
			t.Fatalf("%s: scan error %v", name, it.Error())
		}
		// The first key above block 0's separator is in block 1.
		var inBlock1 []byte
		for _, e := range spec.points {
			if bytes.Compare(e.key.UserKey, layout[0].IndexKey.UserKey) > 0 {
				inBlock1 = e.key.UserKey
				break
			}
		}
		_, _, _, _, err = r.Get(inBlock1, base.SeqNumMax)
		if !errors.Is(err, base.ErrCorruption) {
			t.Fatalf("%s: Get = %v", name, err)
		}
	}
	same := bytes.Clone(data)
	copy(same[b1.Offset:b1.Offset+n], data[b2.Offset:b2.Offset+n])
	check("same file, other offset", same)
	cross := bytes.Clone(data)
	copy(cross[b1.Offset:b1.Offset+n], other[b1.Offset:b1.Offset+n])
	if bytes.Equal(cross, data) {
		t.Fatal("other file's block has the same trailer")
	}
	check("other file, same offset", cross)
}

func TestFooterErrors(t *testing.T) {
	data, _ := build(t, testWriterOptions(checksum.XXH3, SnappyCompression, 4096), goldenSpec())
	foot := len(data) - FooterLen
	cases := []struct {
		name   string
		mutate func(b []byte) []byte
		want   string
	}{
		{"checksum type 123", func(b []byte) []byte { b[foot] = 123; return b }, "Corrupt or unsupported checksum type: 123 in t.sst"},
		{"checksum type none", func(b []byte) []byte { b[foot] = 0; return b }, "Footer at"},
		{"checksum type crc64", func(b []byte) []byte { b[foot] = 5; return b }, "checksum mismatch"},
		{"magic", func(b []byte) []byte { b[len(b)-1] ^= 1; return b }, "Bad table magic number"},
		{"version", func(b []byte) []byte { b[foot+1] = 2; return b }, "Corrupt or unsupported format_version 2"},
		{"base zero", func(b []byte) []byte { copy(b[foot+5:], []byte{0, 0, 0, 0}); return b }, "Invalid base context checksum"},
		{"handle", func(b []byte) []byte { b[foot+9] ^= 1; return b }, "Footer at"},
		{"too short", func(b []byte) []byte { return b[len(b)-10:] }, "too short"},
		{"empty", func(b []byte) []byte { return nil }, "too short"},
	}
	for _, c := range cases {
		_, err := openBytes(c.mutate(bytes.Clone(data)), ReaderOptions{})
		if !errors.Is(err, base.ErrCorruption) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Open = %v, want corruption containing %q", c.name, err, c.want)
		}
	}
	// The RocksDB-compatible message, exactly.
	b := bytes.Clone(data)
	b[foot] = 123
	_, err := openBytes(b, ReaderOptions{FileNum: 7})
	if got := err.Error(); got != "vigil: corruption: Corrupt or unsupported checksum type: 123 in t.sst (file 000007)" {
		t.Errorf("message: %q", got)
	}
}

// TestTruncatedAndPaddedFiles: every prefix and a few extensions of a valid
// table fail to open with a corruption error, never a panic.
func TestTruncatedAndPaddedFiles(t *testing.T) {
	data, _ := build(t, testWriterOptions(checksum.CRC32c, SnappyCompression, 128), goldenSpec())
	for n := 0; n < len(data); n++ {
		if _, err := openBytes(data[:n], ReaderOptions{}); !errors.Is(err, base.ErrCorruption) {
			t.Fatalf("prefix of %d bytes: %v", n, err)
		}
	}
	for _, pad := range []int{1, 53, 4096} {
		if _, err := openBytes(append(bytes.Clone(data), make([]byte, pad)...), ReaderOptions{}); !errors.Is(err, base.ErrCorruption) {
			t.Fatalf("%d bytes appended: %v", pad, err)
		}
	}
	// A size larger than the file: reads come up short.
	_, err := Open(vfs.NewMemFile(data), "t.sst", int64(len(data)+100), ReaderOptions{})
	if !errors.Is(err, base.ErrCorruption) {
		t.Fatalf("size past end: %v", err)
	}
}

// TestParanoidCacheChecks corrupts a cached block in memory (as a RAM bit
// flip would): with paranoid checks the next read reports it and evicts the
// block, so the read after that is correct again.
func TestParanoidCacheChecks(t *testing.T) {
	spec := fixedSpec(100)
	data, _ := build(t, testWriterOptions(checksum.XXH3, SnappyCompression, 4096), spec)
	c := newTestCache()
	r := mustOpen(t, data, ReaderOptions{Cache: wrapCache(c), CacheID: 3, ParanoidCacheChecks: true})
	defer r.Close()
	key := spec.points[10].key.UserKey
	if _, _, _, found, err := r.Get(key, base.SeqNumMax); !found || err != nil {
		t.Fatalf("Get: %v %v", found, err)
	}
	flipped := 0
	c.ForEachBlock(func(d []byte) { d[len(d)/2] ^= 0x04; flipped++ })
	if flipped == 0 {
		t.Fatal("nothing cached")
	}
	_, _, _, _, err := r.Get(key, base.SeqNumMax)
	if !errors.Is(err, base.ErrCorruption) || !strings.Contains(err.Error(), "memory corruption") {
		t.Fatalf("Get after RAM flip = %v", err)
	}
	it := r.NewIter(nil, nil)
	got := collect(t, it, true) // re-reads the evicted block from the file
	it.Close()
	if err := equalKVs(got, spec.points); err != nil {
		t.Fatalf("after eviction: %v", err)
	}
	v, _, _, found, err := r.Get(key, base.SeqNumMax)
	if err != nil || !found || !bytes.Equal(v, spec.points[10].value) {
		t.Fatalf("Get after eviction: %q %v %v", v, found, err)
	}
}

// TestChecksumTypesSideBySide reads tables of every checksum type with one
// shared cache, as a DB does after its checksum option changed.
func TestChecksumTypesSideBySide(t *testing.T) {
	c := newTestCache()
	spec := fixedSpec(300)
	var readers []*Reader
	for ct := checksum.Default; ct < checksum.NumTypes; ct++ {
		data, _ := build(t, testWriterOptions(ct, SnappyCompression, 512), spec)
		readers = append(readers, mustOpen(t, data, ReaderOptions{Cache: wrapCache(c), CacheID: uint64(ct) + 1, ParanoidCacheChecks: true}))
	}
	for _, r := range readers {
		for _, e := range spec.points {
			v, _, _, found, err := r.Get(e.key.UserKey, base.SeqNumMax)
			if err != nil || !found || !bytes.Equal(v, e.value) {
				t.Fatalf("%s: Get(%s) = %q %v %v", r.ChecksumType(), e.key, v, found, err)
			}
		}
		if err := r.Verify(); err != nil {
			t.Fatalf("%s: %v", r.ChecksumType(), err)
		}
	}
	before := c.Metrics().Count
	for _, r := range readers {
		r.Close()
	}
	if before == 0 || c.Metrics().Count != 0 {
		t.Fatalf("cache held %d blocks, %d after closing every reader", before, c.Metrics().Count)
	}
}

// errReaderFile fails every read, to check that I/O errors are passed on
// and not disguised as corruption.
type errReaderFile struct{ vfs.File }

func (errReaderFile) ReadAt([]byte, int64) (int, error) { return 0, errors.New("disk on fire") }

func TestReadErrorsAreNotCorruption(t *testing.T) {
	data, _ := build(t, testWriterOptions(checksum.XXH3, NoCompression, 4096), fixedSpec(10))
	_, err := Open(errReaderFile{vfs.NewMemFile(data)}, "t.sst", int64(len(data)), ReaderOptions{})
	if err == nil || errors.Is(err, base.ErrCorruption) || !strings.Contains(err.Error(), "disk on fire") {
		t.Fatalf("Open = %v", err)
	}
	_ = io.EOF
}

// TestParanoidCacheChecksRandomFlips flips random bits in random cached
// blocks, round after round: with paranoid checks every Get returns either
// the right answer or a corruption error, never a wrong answer, and once
// the damaged blocks are evicted a full scan is correct again.
func TestParanoidCacheChecksRandomFlips(t *testing.T) {
	spec := fixedSpec(2000)
	data, _ := build(t, testWriterOptions(checksum.XXH3, SnappyCompression, 1024), spec)
	c := newTestCache()
	r := mustOpen(t, data, ReaderOptions{Cache: wrapCache(c), CacheID: 3, ParanoidCacheChecks: true})
	defer r.Close()
	rng := newRand(42)
	detected := 0
	for round := 0; round < 30; round++ {
		c.ForEachBlock(func(d []byte) {
			if rng.IntN(4) == 0 {
				d[rng.IntN(len(d))] ^= 1 << rng.IntN(8)
			}
		})
		for _, e := range spec.points {
			v, seq, kind, found, err := r.Get(e.key.UserKey, base.SeqNumMax)
			if err != nil {
				if !errors.Is(err, base.ErrCorruption) {
					t.Fatalf("Get error not corruption: %v", err)
				}
				detected++
				continue
			}
			if !found || seq != e.key.SeqNum() || kind != e.key.Kind() || !bytes.Equal(v, e.value) {
				t.Fatalf("round %d: Get(%s) silently returned %q %v (want %q)", round, e.key, v, found, e.value)
			}
		}
	}
	if detected == 0 {
		t.Fatal("no flip was detected")
	}
	t.Logf("%d reads reported memory corruption", detected)
	// Everything damaged was evicted when detected; the rest was read since.
	it := r.NewIter(nil, nil)
	defer it.Close()
	if err := equalKVs(collect(t, it, true), spec.points); err != nil {
		t.Fatal(err)
	}
}
