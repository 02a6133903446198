package sst

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/klauspost/compress/zstd"
	"github.com/vigildb/vigil/checksum"
	"github.com/vigildb/vigil/internal/base"
)

// TestGoldenZstd pins zstd tables' format by reading: the committed table
// (goldenSpec, XXH3, zstd level 3) must read back to goldenSpec and hold
// zstd blocks. Its bytes are not rebuilt and compared, unlike the other
// golden tables: a newer zstd encoder may produce other frames for the
// same blocks, which every reader still decodes.
func TestGoldenZstd(t *testing.T) {
	const name = "testdata/golden-xxh3-zstd.sst"
	spec := goldenSpec()
	o := goldenOptions(checksum.XXH3, ZstdCompression)
	data, m := build(t, o, spec)
	if *update {
		writeTestdata(t, name, data)
	}
	want := readFile(t, vfs.Default, name)
	r := mustOpen(t, want, ReaderOptions{})
	p := r.Properties()
	r.Close()
	if p.Compression != ZstdCompression {
		t.Fatalf("properties say %s, want zstd", p.Compression)
	}
	m.Size, m.FileChecksum = uint64(len(want)), p.FileChecksum
	checkTable(t, want, m, spec, o, ReaderOptions{})
	if snappy, _ := build(t, goldenOptions(checksum.XXH3, SnappyCompression), spec); len(data) >= len(snappy) {
		t.Errorf("zstd table %d bytes, snappy's %d: want smaller", len(data), len(snappy))
	}
}

// TestZstdBounds: a frame whose header declares more than
// maxZstdExpansion times its length, or more than MaxBlockSize, or no
// content size, is refused before anything is allocated for it; a block
// that would need such a ratio is written uncompressed.
func TestZstdBounds(t *testing.T) {
	enc, _ := zstd.NewWriter(nil, zstd.WithSingleSegment(true))
	zeros := make([]byte, 1<<20)
	frame := enc.EncodeAll(zeros, nil) // a few dozen bytes for a MiB
	if n, ok := zstdDecodedLen(frame); ok {
		t.Fatalf("a %d-byte frame of %d zeros: accepted (%d)", len(frame), len(zeros), n)
	}
	var text []byte
	for i := range 200 {
		text = fmt.Appendf(text, "key%06d value-%d;", i*7919%1000003, i*i)
	}
	frame = enc.EncodeAll(text, nil)
	if n, ok := zstdDecodedLen(frame); !ok || n != len(text) {
		t.Fatalf("a frame of %d text bytes: %d, %v", len(text), n, ok)
	}
	if _, ok := zstdDecodedLen(frame[:3]); ok {
		t.Fatal("a truncated frame header accepted")
	}
	// A frame with no content size: descriptor 0 (no size field, not
	// single-segment), a window descriptor, one raw last block.
	noFCS := []byte{0x28, 0xb5, 0x2f, 0xfd, 0x00, 0x18} // window 8 KiB
	bh := uint32(len(text))<<3 | 1
	noFCS = append(noFCS, byte(bh), byte(bh>>8), byte(bh>>16))
	noFCS = append(noFCS, text...)
	if out, err := zstdDecoder().DecodeAll(noFCS, make([]byte, 0, len(text))); err != nil || !bytes.Equal(out, text) {
		t.Fatalf("the hand-made frame does not decode: %v", err)
	}
	if _, ok := zstdDecodedLen(noFCS); ok {
		t.Fatal("a frame without a content size accepted")
	}
	// The same with a content size but not single-segment (its window,
	// not its content, would size the decoder's buffer): refused too.
	withFCS := append([]byte{0x28, 0xb5, 0x2f, 0xfd, 0x40, 0x18}, byte(len(text)), byte(len(text)>>8))
	withFCS = append(withFCS, noFCS[6:]...)
	if _, ok := zstdDecodedLen(withFCS); ok {
		t.Fatal("a multi-segment frame accepted")
	}
	// A second frame after the first cannot make the decoder produce (or
	// allocate for) more than the first declared.
	two := append(enc.EncodeAll(text, nil), enc.EncodeAll(zeros, nil)...)
	n, ok := zstdDecodedLen(two)
	if !ok || n != len(text) {
		t.Fatalf("first frame of two: %d, %v", n, ok)
	}
	dst := make([]byte, n)
	if out, err := zstdDecoder().DecodeAll(two, dst[:0]); err == nil || cap(out) > n {
		t.Fatalf("two frames decoded into a block of %d: %d bytes (cap %d), %v", n, len(out), cap(out), err)
	}

	// The writer stores a run of one byte uncompressed.
	f, _ := testFS().Create("z")
	w := NewWriter(f, testWriterOptions(checksum.XXH3, ZstdCompression, 64<<10))
	if _, c := w.compress(zeros[:64<<10], true); c != NoCompression {
		t.Fatalf("64 KiB of zeros stored as %s", c)
	}
	if b, c := w.compress(text, true); c != ZstdCompression || len(b) >= len(text) {
		t.Fatalf("text stored as %s, %d bytes", c, len(b))
	}
	w.Abort()

	// A level out of range is refused.
	o := testWriterOptions(checksum.XXH3, ZstdCompression, 4096)
	o.ZstdLevel = MaxZstdLevel + 1
	f, _ = testFS().Create("y")
	w = NewWriter(f, o)
	if err := w.Add(base.MakeInternalKey([]byte("a"), 1, base.KindSet), nil); !errors.Is(err, base.ErrInvalidArgument) {
		t.Fatalf("zstd level %d: %v, want ErrInvalidArgument", o.ZstdLevel, err)
	}
	w.Abort()
}

// TestZstdLevels: every level writes a table that reads back.
func TestZstdLevels(t *testing.T) {
	spec := goldenSpec()
	for _, level := range []int{0, 1, 3, 7, 19, MaxZstdLevel} {
		o := testWriterOptions(checksum.XXH3, ZstdCompression, 512)
		o.ZstdLevel = level
		data, m := build(t, o, spec)
		checkTable(t, data, m, spec, o, ReaderOptions{})
	}
}
