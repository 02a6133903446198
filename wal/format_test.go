package wal

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"flag"
	"fmt"
	"github.com/cockroachdb/pebble/vfs"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cespare/xxhash/v2"
	"github.com/vigildb/vigil/checksum"
	"github.com/zeebo/xxh3"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

// independent re-derivations of the on-disk formulas, written from the
// package documentation rather than by calling the package's helpers.

func testMask(c uint32) uint32 { return ((c >> 15) | (c << 17)) + 0xa282ead8 }

// testCRC64Jones is CRC-64/Jones in the inverted form checksum.Sum64 uses
// (initial value and final xor all ones), bit by bit.
func testCRC64Jones(p []byte) uint64 {
	crc := ^uint64(0)
	for _, b := range p {
		crc ^= uint64(b)
		for range 8 {
			if crc&1 == 1 {
				crc = crc>>1 ^ 0x95ac9329ac4bc9b5
			} else {
				crc >>= 1
			}
		}
	}
	return ^crc
}

func testHash(t checksum.Type, p []byte) uint32 {
	switch t {
	case checksum.CRC32c:
		return testMask(crc32.Checksum(p, crc32.MakeTable(crc32.Castagnoli)))
	case checksum.XXHash:
		return checksum.XXH32(p, 0) // no other XXH32 among our dependencies
	case checksum.XXHash64:
		return uint32(xxhash.Sum64(p))
	case checksum.XXH3:
		return uint32(xxh3.Hash(p))
	case checksum.CRC64:
		return uint32(testCRC64Jones(p))
	}
	panic("no hash for " + t.String())
}

// TestFileHeaderBytes builds the header byte by byte from the documented
// layout and compares it with what the Writer writes.
func TestFileHeaderBytes(t *testing.T) {
	// The documented type bytes (RocksDB's numbers); Default is written as
	// XXH3.
	codes := map[checksum.Type]byte{checksum.None: 0, checksum.CRC32c: 1, checksum.XXHash: 2,
		checksum.XXHash64: 3, checksum.XXH3: 4, checksum.CRC64: 5, checksum.Default: 4}
	for _, ct := range append(allTypes, checksum.Default) {
		const logNum = 0x0102030405060708
		data, _ := writeLog(t, logNum, ct, nil)
		want := []byte("VIGLRLOG")
		want = append(want, 2, codes[ct], 0, 0) // version 2
		want = binary.LittleEndian.AppendUint64(want, logNum)
		want = binary.LittleEndian.AppendUint32(want, testMask(crc32.Checksum(want, crc32.MakeTable(crc32.Castagnoli))))
		if !bytes.Equal(data, want) {
			t.Fatalf("%s: header\n got %x\nwant %x", ct, data, want)
		}
	}
}

// TestRecycledHeaderBytes: a recycled log's header is the same layout
// with flag 0x01 in byte 10, as WriteRecycledHeader writes it.
func TestRecycledHeaderBytes(t *testing.T) {
	fs := vfs.NewMem()
	f, err := fs.Create("log")
	if err != nil {
		t.Fatal(err)
	}
	const logNum = 0x0102030405060708
	if err := WriteRecycledHeader(f, logNum, checksum.XXH3); err != nil {
		t.Fatal(err)
	}
	f.Close()
	want := append([]byte("VIGLRLOG"), 2, 4, 0x01, 0)
	want = binary.LittleEndian.AppendUint64(want, logNum)
	want = binary.LittleEndian.AppendUint32(want, testMask(crc32.Checksum(want, crc32.MakeTable(crc32.Castagnoli))))
	if data := readFile(t, fs, "log"); !bytes.Equal(data, want) {
		t.Fatalf("recycled header\n got %x\nwant %x", data, want)
	}
}

// TestFragmentChecksums parses a log written by the Writer with the
// documented layout and recomputes every fragment's checksum from the
// documented formula with independent hash implementations.
func TestFragmentChecksums(t *testing.T) {
	recs := [][]byte{nil, []byte("x"), pattern(1, 3*BlockSize), pattern(2, 1000), pattern(3, BlockSize-100)}
	for _, logNum := range []uint64{0, 77, 1<<32 + 9} {
		for _, ct := range checkedTypes {
			data, _ := writeLog(t, logNum, ct, recs)
			n := 0
			for off := int64(FileHeaderSize); off < int64(len(data)); {
				if rest := BlockSize - off%BlockSize; rest < FragmentHeaderSize {
					off += rest
					continue
				}
				stored := binary.LittleEndian.Uint32(data[off:])
				length := int64(binary.LittleEndian.Uint16(data[off+4:]))
				// Covered: every header byte after the checksum (length,
				// type) and the payload.
				covered := data[off+4 : off+FragmentHeaderSize+length]
				ctx := (uint32(logNum) ^ uint32(logNum>>32) ^ 0x76676c31) ^ (uint32(off) + uint32(uint64(off)>>32))
				if want := testHash(ct, covered) + ctx; stored != want {
					t.Fatalf("%s log %d: fragment at %d: stored %#08x, documented formula gives %#08x", ct, logNum, off, stored, want)
				}
				n++
				off += FragmentHeaderSize + length
			}
			if n < 8 {
				t.Fatalf("%s: only %d fragments checked", ct, n)
			}
		}
	}
}

// goldenLogs are the logs pinned by testdata/golden: any change to the
// bytes a Writer produces for them is a format change.
func goldenLogs(t *testing.T) map[string][]byte {
	out := map[string][]byte{}
	small := [][]byte{nil, []byte("a"), []byte("hello, vigil"), pattern(7, 40)}
	for _, ct := range allTypes {
		out["small-"+ct.String()], _ = writeLog(t, 0x0102030405, ct, small)
	}
	multi := [][]byte{pattern(8, BlockSize-FileHeaderSize-FragmentHeaderSize-3), pattern(9, 40000), pattern(10, BlockSize-40000+BlockSize-2*FragmentHeaderSize-7-FragmentHeaderSize), []byte("end"), nil}
	out["multiblock-xxh3"], _ = writeLog(t, 9, checksum.XXH3, multi)
	out["multiblock-crc32c"], _ = writeLog(t, 9, checksum.CRC32c, multi)
	return out
}

// render describes a log for a golden file: the file header and every
// fragment's header (offset, type, length, checksum) and payload digest,
// with a full hex dump for small logs and the SHA-256 of the whole file.
func render(data []byte) string {
	var b strings.Builder
	fmt.Fprintf(&b, "size %d\nsha256 %x\nheader %x\n", len(data), sha256.Sum256(data), data[:FileHeaderSize])
	for off := int64(FileHeaderSize); off < int64(len(data)); {
		if rest := BlockSize - off%BlockSize; rest < FragmentHeaderSize {
			fmt.Fprintf(&b, "%7d padding %d %x\n", off, rest, data[off:off+rest])
			off += rest
			continue
		}
		length := int64(binary.LittleEndian.Uint16(data[off+4:]))
		payload := data[off+FragmentHeaderSize : off+FragmentHeaderSize+length]
		fmt.Fprintf(&b, "%7d %-6s len %5d crc %08x payload-sha256 %x\n", off, fragTypeName(data[off+6]), length,
			binary.LittleEndian.Uint32(data[off:]), sha256.Sum256(payload))
		off += FragmentHeaderSize + length
	}
	if len(data) <= 512 {
		for i := 0; i < len(data); i += 16 {
			fmt.Fprintf(&b, "%04x  %x\n", i, data[i:min(i+16, len(data))])
		}
	}
	return b.String()
}

func TestGolden(t *testing.T) {
	for name, data := range goldenLogs(t) {
		path := filepath.Join("testdata", "golden", name+".txt")
		got := render(data)
		if *update {
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run go test -run TestGolden -update to create it)", err)
		}
		if got != string(want) {
			t.Errorf("%s: the record log format changed.\n got:\n%s\nwant:\n%s", name, got, want)
		}
		// The golden bytes must also read back.
		if res := readAll(t, data, AbsoluteConsistency); res.err != nil {
			t.Errorf("%s: %v", name, res.err)
		}
	}
}
