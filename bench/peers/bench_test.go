package peers

import (
	"path/filepath"
	"testing"

	"github.com/vigildb/vigil/bench"
)

// benchKeys is the store size of the engine benchmarks: big enough for
// several SSTs after the flush, small enough to load in well under a
// second.
const benchKeys = 50_000

// BenchmarkEngines measures each engine's hot paths through the same
// bench.Engine calls kvbench makes, side by side, for `go test -bench
// Engines -cpuprofile` on one path at a time:
//
//	put:         Put of sequential keys (memtable inserts, WAL on, no fsync)
//	get/mem:     Get of random present keys from the memtable
//	get/disk:    Get of random present keys after flush + compact
//	next/disk:   one iterator step of a forward scan over the compacted store
//	prev/disk:   one step of a reverse scan
func BenchmarkEngines(b *testing.B) {
	for _, c := range DefaultContenders(PebbleMemtableCacheCredit) {
		b.Run(c.Name, func(b *testing.B) {
			o := bench.EngineOptions{
				Dir: filepath.Join(b.TempDir(), "db"), WriteBufferSize: 64 << 20, ChecksumType: 4,
				BlockSize: 4096, CacheSize: 64 << 20, BloomBits: 10, Compression: "snappy",
			}
			e, err := c.Open(o)
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close()
			values := bench.NewValueGenerator(0.5, 100)
			key := make([]byte, 16)

			b.Run("put", func(b *testing.B) {
				// Keys above benchKeys, so the loaded store stays as is.
				for i := 0; b.Loop(); i++ {
					if err := e.Put(bench.MakeKey(key, uint64(benchKeys+i)), values.Next(100), false); err != nil {
						b.Fatal(err)
					}
				}
			})
			for i := uint64(0); i < benchKeys; i++ {
				if err := e.Put(bench.MakeKey(key, i), values.Next(100), false); err != nil {
					b.Fatal(err)
				}
			}
			get := func(b *testing.B) {
				x := uint64(1)
				var buf []byte
				for b.Loop() {
					x = x*6364136223846793005 + 1442695040888963407
					found, _, err := e.Get(bench.MakeKey(key, (x>>33)%benchKeys), &buf)
					if err != nil || !found {
						b.Fatalf("get: %v %v", found, err)
					}
				}
			}
			b.Run("get/mem", get)
			if err := e.Flush(); err != nil {
				b.Fatal(err)
			}
			if err := e.Compact(); err != nil {
				b.Fatal(err)
			}
			b.Run("get/disk", get)
			for _, forward := range []bool{true, false} {
				name := "next/disk"
				if !forward {
					name = "prev/disk"
				}
				b.Run(name, func(b *testing.B) {
					it, err := e.NewIter()
					if err != nil {
						b.Fatal(err)
					}
					defer it.Close()
					valid := false
					for b.Loop() {
						if !valid {
							// Wrap around; the key check below fails on an empty DB.
							if forward {
								it.First()
							} else {
								it.Last()
							}
						}
						if len(it.Key()) == 0 {
							b.Fatal("empty key")
						}
						if forward {
							valid = it.Next()
						} else {
							valid = it.Prev()
						}
					}
				})
			}
		})
	}
}
