package checksum

import (
	"fmt"
	"hash/crc64"
	"testing"
)

// benchSizes are the sizes every checksum is measured at: a small value, a
// typical block, a large buffer (whole-file checksums).
var benchSizes = []struct {
	name string
	n    int
}{{"64B", 64}, {"4KiB", 4096}, {"1MiB", 1 << 20}}

func benchData(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i>>8)
	}
	return b
}

var sink32 uint32
var sink64 uint64

// BenchmarkBlock measures the trailer checksum (data ‖ type byte) of every
// type: the hot path of every block write and read.
func BenchmarkBlock(b *testing.B) {
	for t := CRC32c; t < NumTypes; t++ {
		for _, s := range benchSizes {
			data := benchData(s.n)
			b.Run(fmt.Sprintf("%s/%s", t, s.name), func(b *testing.B) {
				b.SetBytes(int64(s.n))
				for b.Loop() {
					sink32 = Block(t, data, 1)
				}
			})
		}
	}
}

// BenchmarkSum64 measures the full-width form (per-KV and file checksums).
func BenchmarkSum64(b *testing.B) {
	for t := CRC32c; t < NumTypes; t++ {
		for _, s := range benchSizes {
			data := benchData(s.n)
			b.Run(fmt.Sprintf("%s/%s", t, s.name), func(b *testing.B) {
				b.SetBytes(int64(s.n))
				for b.Loop() {
					sink64 = Sum64(t, data)
				}
			})
		}
	}
}

// BenchmarkKV measures the per-key-value checksum of a 16-byte key and a
// 100-byte value (db_bench's default sizes).
func BenchmarkKV(b *testing.B) {
	key, value := benchData(16), benchData(100)
	for t := CRC32c; t < NumTypes; t++ {
		b.Run(t.String(), func(b *testing.B) {
			b.SetBytes(int64(len(key) + 8 + len(value)))
			for b.Loop() {
				sink64 = KV(t, key, 42, value)
			}
		})
	}
}

// BenchmarkCRC64 compares the public UpdateCRC64 (whatever path this CPU
// selects), the pure-Go path, and Go's hash/crc64 with the Jones table.
func BenchmarkCRC64(b *testing.B) {
	std := crc64.MakeTable(JonesPoly)
	impls := []struct {
		name string
		f    func([]byte) uint64
	}{
		{"UpdateCRC64", func(p []byte) uint64 { return UpdateCRC64(0, p) }},
		{"generic", func(p []byte) uint64 { return updateCRC64Generic(0, p) }},
		{"slice8", func(p []byte) uint64 { return updateCRC64Slice8(0, p) }},
		{"stdlib", func(p []byte) uint64 { return crc64.Update(0, std, p) }},
	}
	for _, impl := range impls {
		for _, s := range benchSizes {
			data := benchData(s.n)
			b.Run(impl.name+"/"+s.name, func(b *testing.B) {
				b.SetBytes(int64(s.n))
				for b.Loop() {
					sink64 = impl.f(data)
				}
			})
		}
	}
}

// BenchmarkCombineCRC64 measures merging two CRCs for lengths with 1, 3, 5
// and 16 non-zero hex digits (the cost grows with that count, not with the
// length itself).
func BenchmarkCombineCRC64(b *testing.B) {
	getShiftTable()
	lens := []int64{4096, 1<<20 + 4095, 5_480_000, 1<<63 - 1}
	impls := []struct {
		name string
		f    func(a, b uint64, n int64) uint64
	}{
		{"CombineCRC64", CombineCRC64},
		{"generic", func(a, b uint64, n int64) uint64 { return combineCRC64Generic(a, b, uint64(n)) }},
	}
	for _, impl := range impls {
		for _, n := range lens {
			b.Run(fmt.Sprintf("%s/len=%d", impl.name, n), func(b *testing.B) {
				crc := uint64(0x0123456789abcdef)
				for b.Loop() {
					crc = impl.f(crc, 0x5555, n)
				}
				sink64 = crc
			})
		}
	}
}

// BenchmarkDigest measures the streaming whole-file checksum: 1 MiB written
// in 4 KiB pieces, as a table writer or Verify feeds it.
func BenchmarkDigest(b *testing.B) {
	data := benchData(1 << 20)
	for t := CRC32c; t < NumTypes; t++ {
		b.Run(t.String(), func(b *testing.B) {
			d := NewDigest(t)
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				d.Reset(t)
				for p := data; len(p) > 0; p = p[4096:] {
					_, _ = d.Write(p[:4096])
				}
				sink64 = d.Sum64()
			}
		})
	}
}

// BenchmarkKVSplit measures the two halves of KV apart: KVUnsequenced (a
// batch's per-entry protection, one per Put) and KVSequence (the memtable
// deriving its checksum from the batch's).
func BenchmarkKVSplit(b *testing.B) {
	key, value := benchData(16), benchData(100)
	b.Run("unsequenced", func(b *testing.B) {
		for b.Loop() {
			sink64 = KVUnsequenced(XXH3, key, 1, value)
		}
	})
	b.Run("sequence", func(b *testing.B) {
		u := KVUnsequenced(XXH3, key, 1, value)
		for b.Loop() {
			sink64 = KVSequence(u, 42<<8|1)
		}
	})
}
