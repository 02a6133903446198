package backup

import (
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/vigildb/vigil"
	"github.com/vigildb/vigil/checksum"
)

var update = flag.Bool("update", false, "rewrite testdata/meta-v2.golden and the fuzz seed corpus")

// goldenPath is the current format's golden file; goldenV1Path the
// previous version's, which is refused.
const goldenPath, goldenV1Path = "testdata/meta-v2.golden", "testdata/meta-v1.golden"

func goldenInfo() *Info {
	return &Info{
		ID:           3,
		Created:      time.Unix(1764547200, 123456789),
		Seq:          4242,
		Digest:       vigil.RangeDigest{CRC64: 0x0123456789abcdef, Bytes: 123456, Keys: 789},
		ChecksumType: checksum.CRC64,
		Files: []File{
			{Shared: true, Name: "000012_4096_00000000deadbeef_1a2b3c4d.sst", Size: 4096, Checksum: 0x1111222233334444},
			{Shared: true, Name: "000013_70000_0123456789abcdef_00000001.sst", Size: 70000, Checksum: 0xfedcba9876543210},
			{Name: "000014.log", Size: 300, Checksum: 1},
			{Name: "CURRENT", Size: 16, Checksum: 0},
			{Name: "MANIFEST-000015", Size: 200, Checksum: 0x8000000000000000},
			{Name: "OPTIONS-000017", Size: 634, Checksum: 0xffffffffffffffff},
		},
	}
}

// equalInfo compares two Infos, the times by instant.
func equalInfo(a, b *Info) bool {
	if !a.Created.Equal(b.Created) {
		return false
	}
	x, y := *a, *b
	x.Created, y.Created = time.Time{}, time.Time{}
	return reflect.DeepEqual(x, y)
}

// TestMetaGolden pins the meta file format: a change to the encoding must
// come with a new format version.
func TestMetaGolden(t *testing.T) {
	enc := encodeMeta(goldenInfo())
	if *update {
		if err := os.WriteFile(goldenPath, enc, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	golden, err := os.ReadFile(goldenPath)
	if err != nil {
		t.Fatal(err)
	}
	if !sameBytes(enc, golden) {
		t.Fatalf("encoding changed:\n got %x\nwant %x", enc, golden)
	}
	info, err := decodeMeta(golden, goldenPath)
	if err != nil {
		t.Fatal(err)
	}
	if !equalInfo(info, goldenInfo()) {
		t.Fatalf("decoded %+v\nwant %+v", info, goldenInfo())
	}
	// Version 1 (the same layout) is refused, naming the version.
	v1, err := os.ReadFile(goldenV1Path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := decodeMeta(v1, goldenV1Path); !errors.Is(err, vigil.ErrCorruption) || !strings.Contains(err.Error(), "unsupported format version 1") {
		t.Fatalf("decoding a version-1 meta file: %v", err)
	}
	if info.Files[0].DBName() != "000012.sst" || info.Files[2].DBName() != "000014.log" {
		t.Fatalf("DB names %q %q", info.Files[0].DBName(), info.Files[2].DBName())
	}
	if info.Size() != 4096+70000+300+16+200+634 {
		t.Fatalf("Size = %d", info.Size())
	}
}

// TestMetaDamage: every truncation and every single-bit flip of the golden
// meta file is corruption.
func TestMetaDamage(t *testing.T) {
	golden := encodeMeta(goldenInfo())
	for n := 0; n < len(golden); n++ {
		if _, err := decodeMeta(golden[:n], "m"); !errors.Is(err, vigil.ErrCorruption) {
			t.Fatalf("truncated to %d: %v", n, err)
		}
	}
	if _, err := decodeMeta(append(golden, 0), "m"); !errors.Is(err, vigil.ErrCorruption) {
		t.Fatalf("one byte appended: %v", err)
	}
	b := append([]byte(nil), golden...)
	for i := range len(b) * 8 {
		b[i/8] ^= 1 << (i % 8)
		if _, err := decodeMeta(b, "m"); !errors.Is(err, vigil.ErrCorruption) || !strings.Contains(err.Error(), "backup meta m") {
			t.Fatalf("bit %d flipped: %v", i, err)
		}
		b[i/8] ^= 1 << (i % 8)
	}
}

// resign replaces the trailer of b with the checksum of the rest, so that
// tests (and the fuzzer) reach the checks behind it.
func resign(b []byte) []byte {
	if len(b) < metaTrailer {
		return b
	}
	b = append([]byte(nil), b...)
	n := len(b) - metaTrailer
	binary.LittleEndian.PutUint64(b[n:], checksum.Sum64(checksum.CRC64, b[:n]))
	return b
}

// body returns the encoding of info without its trailer, to mutate.
func body(info *Info) []byte {
	b := encodeMeta(info)
	return b[:len(b)-metaTrailer]
}

func withTrailer(b []byte) []byte { return resign(append(b, make([]byte, metaTrailer)...)) }

// badMetas are well-signed meta files that must not decode, and why.
func badMetas() map[string][]byte {
	m := map[string][]byte{}
	mod := func(name string, f func(*Info)) {
		in := goldenInfo()
		f(in)
		m[name] = encodeMeta(in)
	}
	mod("id 0", func(in *Info) { in.ID = 0 })
	mod("checksum type none", func(in *Info) { in.ChecksumType = checksum.None })
	mod("checksum type 9", func(in *Info) { in.ChecksumType = 9 })
	mod("shared name syntax", func(in *Info) { in.Files[0].Name = "000012.sst" })
	mod("shared name size", func(in *Info) { in.Files[0].Size = 4097 })
	mod("shared name hex", func(in *Info) { in.Files[0].Name = "000012_4096_00000000DEADBEEF_1a2b3c4d.sst" })
	mod("private name", func(in *Info) { in.Files[2].Name = "../../etc/passwd" })
	mod("private name sst", func(in *Info) { in.Files[2].Name = "000012.sst" })
	mod("duplicate", func(in *Info) { in.Files[1] = in.Files[0] })
	mod("name too long", func(in *Info) { in.Files[2].Name = strings.Repeat("1", 300) + ".log" })
	mod("empty name", func(in *Info) { in.Files[3].Name = "" })

	b := encodeMeta(goldenInfo())
	binary.LittleEndian.PutUint32(b[len(metaMagic):], 3)
	m["version 3"] = resign(b)
	b = encodeMeta(goldenInfo())
	b[0] = 'X'
	m["magic"] = resign(b)
	m["trailing byte"] = withTrailer(append(body(goldenInfo()), 0))
	// The id as a non-minimal varint: 0x83 0x00 instead of 0x03.
	bd := body(goldenInfo())
	m["non-minimal varint"] = withTrailer(append(append(append([]byte(nil), bd[:metaHeader]...), 0x83, 0x00), bd[metaHeader+1:]...))
	// A file count far beyond the bytes: an allocation bomb if trusted.
	in := goldenInfo()
	in.Files = nil
	bd = body(in)
	m["file count"] = withTrailer(append(bd[:len(bd)-1], 0xff, 0xff, 0xff, 0xff, 0x0f))
	m["truncated file"] = withTrailer(append(bd[:len(bd)-1], 1, kindShared, 5, 'a'))
	m["bad kind"] = withTrailer(append(bd[:len(bd)-1], 1, 7, 7, 'C', 'U', 'R', 'R', 'E', 'N', 'T', 16, 0, 0, 0, 0, 0, 0, 0, 0))
	m["varint overflow"] = withTrailer(append(bd[:len(bd)-1], 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f))
	return m
}

func TestMetaMalformed(t *testing.T) {
	for name, b := range badMetas() {
		_, err := decodeMeta(b, "m")
		if !errors.Is(err, vigil.ErrCorruption) {
			t.Errorf("%s: %v", name, err)
			continue
		}
		t.Logf("%s: %v", name, err)
	}
	// No files at all is a valid (if useless) encoding.
	in := goldenInfo()
	in.Files = nil
	if got, err := decodeMeta(encodeMeta(in), "m"); err != nil || len(got.Files) != 0 {
		t.Fatalf("no files: %+v, %v", got, err)
	}
}

// FuzzDecodeMeta: decoding never panics, and whatever decodes re-encodes
// to the same bytes. Each input is also tried re-signed, so the fuzzer
// reaches the body's checks behind the trailer checksum.
func FuzzDecodeMeta(f *testing.F) {
	f.Add(encodeMeta(goldenInfo()))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, b := range [][]byte{data, resign(data)} {
			info, err := decodeMeta(b, "fuzz")
			if err != nil {
				if !errors.Is(err, vigil.ErrCorruption) {
					t.Fatalf("error not corruption: %v", err)
				}
				continue
			}
			if enc := encodeMeta(info); !sameBytes(enc, b) {
				t.Fatalf("decode/encode changed the bytes:\n in %x\nout %x", b, enc)
			}
		}
	})
}

// TestWriteFuzzCorpus writes the seed corpus of FuzzDecodeMeta (with
// -update): the golden file, its damaged forms and the malformed ones.
func TestWriteFuzzCorpus(t *testing.T) {
	if !*update {
		t.Skip("run with -update to rewrite testdata/fuzz/FuzzDecodeMeta")
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzDecodeMeta")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	golden := encodeMeta(goldenInfo())
	seeds := map[string][]byte{
		"golden":        golden,
		"golden-v1":     readGoldenV1(t),
		"truncated":     golden[:len(golden)/2],
		"flipped":       func() []byte { b := append([]byte(nil), golden...); b[20] ^= 4; return b }(),
		"header only":   golden[:metaHeader+metaTrailer],
		"resigned-flip": resign(func() []byte { b := append([]byte(nil), golden...); b[30] ^= 0x80; return b }()),
	}
	for name, b := range badMetas() {
		seeds[name] = b
	}
	for name, b := range seeds {
		fn := filepath.Join(dir, strings.NewReplacer(" ", "-").Replace(name))
		content := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", b)
		if err := os.WriteFile(fn, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func readGoldenV1(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile(goldenV1Path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
