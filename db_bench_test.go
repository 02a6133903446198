package vigil

import (
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/vigildb/vigil/checksum"
)

// Whole-DB hot paths. Keys are db_bench's (8-byte big-endian index padded
// to 16 bytes), values 100 bytes. Compare runs with benchstat.

const benchDBKeys = 250_000

func benchKey(dst []byte, i uint64) []byte {
	binary.BigEndian.PutUint64(dst, i)
	for j := 8; j < len(dst); j++ {
		dst[j] = '0'
	}
	return dst
}

func benchValue() []byte {
	v := make([]byte, 100)
	for i := range v {
		v[i] = byte('a' + i%26)
	}
	return v
}

// openBenchDB opens a DB on disk with the given tweaks and loads n keys.
func openBenchDB(b *testing.B, n int, tweak func(*Options), onDisk bool) *DB {
	b.Helper()
	o := &Options{WriteBufferSize: 256 << 20}
	if tweak != nil {
		tweak(o)
	}
	db, err := Open(b.TempDir(), o)
	if err != nil {
		b.Fatal(err)
	}
	key := make([]byte, 16)
	val := benchValue()
	for i := 0; i < n; i++ {
		if err := db.Put(benchKey(key, uint64(i)), val, nil); err != nil {
			b.Fatal(err)
		}
	}
	if onDisk {
		if err := db.Compact(nil, nil); err != nil {
			b.Fatal(err)
		}
	}
	return db
}

var benchConfigs = []struct {
	name  string
	tweak func(*Options)
}{
	{"default", nil},
	{"paranoid", func(o *Options) { o.ParanoidMemoryChecks = true }},
	{"protect8", func(o *Options) { o.MemtableProtectionBytesPerKey = 8 }},
}

func BenchmarkPut(b *testing.B) {
	for _, c := range benchConfigs {
		b.Run(c.name, func(b *testing.B) { benchPuts(b, c.tweak) })
	}
}

// BenchmarkPutChecksum is BenchmarkPut (sequential keys, WAL on, into a
// 256 MiB memtable, on disk) for each checksum type: the checksum covers
// each WAL record, so this is what a type costs a write.
func BenchmarkPutChecksum(b *testing.B) {
	for t := checksum.None; t < checksum.NumTypes; t++ {
		b.Run(t.String(), func(b *testing.B) {
			benchPuts(b, func(o *Options) { o.ChecksumType = t })
		})
	}
}

// benchPuts times sequential Puts into an empty DB opened with tweak.
func benchPuts(b *testing.B, tweak func(*Options)) {
	db := openBenchDB(b, 0, tweak, false)
	defer db.Close()
	key := make([]byte, 16)
	val := benchValue()
	b.SetBytes(116)
	for i := 0; b.Loop(); i++ {
		if err := db.Put(benchKey(key, uint64(i)), val, nil); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkGet(b *testing.B) {
	for _, where := range []string{"memtable", "disk"} {
		for _, c := range benchConfigs {
			b.Run(fmt.Sprintf("%s/%s", where, c.name), func(b *testing.B) {
				db := openBenchDB(b, benchDBKeys, c.tweak, where == "disk")
				defer db.Close()
				benchGets(b, db, benchDBKeys, nil)
			})
		}
	}
}

// benchGets times random GetAppends of the first n keys, one per
// iteration, after calling each (if not nil) with the iteration number.
func benchGets(b *testing.B, db *DB, n uint64, each func(i int)) {
	key := make([]byte, 16)
	x := uint64(1)
	var buf []byte
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if each != nil {
			each(i)
		}
		x = x*6364136223846793005 + 1442695040888963407
		var err error
		if buf, err = db.GetAppend(buf[:0], benchKey(key, (x>>33)%n)); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkScan(b *testing.B) {
	for _, where := range []string{"memtable", "disk"} {
		for _, c := range benchConfigs {
			for _, dir := range []string{"forward", "reverse"} {
				b.Run(fmt.Sprintf("%s/%s/%s", where, c.name, dir), func(b *testing.B) {
					db := openBenchDB(b, benchDBKeys, c.tweak, where == "disk")
					defer db.Close()
					it, err := db.NewIter(nil)
					if err != nil {
						b.Fatal(err)
					}
					defer it.Close()
					b.ReportAllocs()
					valid := false
					for b.Loop() {
						if !valid {
							if dir == "forward" {
								valid = it.First()
							} else {
								valid = it.Last()
							}
						} else if dir == "forward" {
							valid = it.Next()
						} else {
							valid = it.Prev()
						}
					}
				})
			}
		}
	}
}

// openTombBenchDB loads 100k keys and then n range tombstones (disjoint,
// each over one absent key) into a memtable, flushed to an L0 table if
// flush is set.
func openTombBenchDB(b *testing.B, n int, flush bool) *DB {
	db := openBenchDB(b, 100_000, nil, false)
	key, end := make([]byte, 16), make([]byte, 16)
	for i := 0; i < n; i++ {
		k := uint64(200_000 + 2*i)
		if err := db.DeleteRange(benchKey(key, k), benchKey(end, k+1), nil); err != nil {
			b.Fatal(err)
		}
	}
	if flush {
		if err := db.Flush(); err != nil {
			b.Fatal(err)
		}
	}
	return db
}

// BenchmarkGetRangeDels reads at the latest state from 100k keys next to n
// range tombstones, in the memtable or flushed to an L0 table.
func BenchmarkGetRangeDels(b *testing.B) {
	for _, where := range []string{"memtable", "disk"} {
		for _, n := range []int{4, 64, 2048} {
			b.Run(fmt.Sprintf("%s/tombstones=%d", where, n), func(b *testing.B) {
				db := openTombBenchDB(b, n, where == "disk")
				defer db.Close()
				benchGets(b, db, 100_000, nil)
			})
		}
	}
}

// BenchmarkGetRangeDelsInterleaved alternates one DeleteRange and one Get
// over a memtable that already holds 2048 tombstones: the worst case for a
// tombstone cache that a new tombstone makes stale.
func BenchmarkGetRangeDelsInterleaved(b *testing.B) {
	db := openTombBenchDB(b, 2048, false)
	defer db.Close()
	key, end := make([]byte, 16), make([]byte, 16)
	benchGets(b, db, 100_000, func(i int) {
		k := uint64(1_000_000 + 2*i)
		if err := db.DeleteRange(benchKey(key, k), benchKey(end, k+1), nil); err != nil {
			b.Fatal(err)
		}
	})
}

// BenchmarkNewIterRangeDels opens an iterator, seeks once and closes it,
// over 100k keys and n range tombstones in the memtable or, flushed, in an
// L0 table.
func BenchmarkNewIterRangeDels(b *testing.B) {
	for _, n := range []int{0, 2048} {
		for _, where := range []string{"memtable", "disk"} {
			b.Run(fmt.Sprintf("tombstones=%d/%s", n, where), func(b *testing.B) {
				db := openTombBenchDB(b, n, where == "disk")
				defer db.Close()
				key := make([]byte, 16)
				b.ReportAllocs()
				for b.Loop() {
					it, err := db.NewIter(nil)
					if err != nil {
						b.Fatal(err)
					}
					it.SeekGE(benchKey(key, 500))
					if err := it.Close(); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
