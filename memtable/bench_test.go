package memtable

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"testing"

	"github.com/vigildb/vigil/checksum"
	"github.com/vigildb/vigil/internal/base"
)

// Benchmarks: 16-byte user keys (8-byte big-endian number then 8 filler
// bytes, as db_bench makes them), 100-byte values, XXH3 protection.
// VIGIL_BENCH_ENTRIES sets the size of the memtables Get and scans run over
// (default 1M, built once per protection setting from random inserts).

const (
	benchKeyLen   = 16
	benchValueLen = 100
)

func benchEntries() int {
	if s := os.Getenv("VIGIL_BENCH_ENTRIES"); s != "" {
		if n, err := strconv.Atoi(s); err == nil && n > 0 {
			return n
		}
	}
	return 1 << 20
}

func benchKey(buf []byte, n uint64) []byte {
	buf = binary.BigEndian.AppendUint64(buf[:0], n)
	return append(buf, "00000000"...)
}

// benchOptions are the options of a memtable for entries benchmark
// entries, with a filter the DB's default size (1/128 of the arena; none
// with paranoid checks), built only after 1024 Gets (so an Add benchmark
// has none; see BenchmarkAddFiltered).
func benchOptions(entries, prot int, paranoid bool) Options {
	size := entries*EntrySize(benchKeyLen, benchValueLen) + MinSize
	o := Options{
		Size:                  size,
		ParanoidMemoryChecks:  paranoid,
		ProtectionBytesPerKey: prot,
		FilterBytes:           size / 128,
	}
	if prot > 0 {
		o.ChecksumType = checksum.XXH3
	}
	return o
}

func BenchmarkAdd(b *testing.B) {
	for _, order := range []string{"seq", "random"} {
		for _, prot := range []int{0, 8} {
			for _, paranoid := range []bool{false, true} {
				b.Run(fmt.Sprintf("%s/prot=%d/paranoid=%t", order, prot, paranoid), func(b *testing.B) {
					o := benchOptions(addsPerTable, prot, paranoid)
					benchAdds(b, order == "random", func() *MemTable { return mustNew(b, o) })
				})
			}
		}
	}
}

// BenchmarkAddFiltered is BenchmarkAdd/random with the filter built at
// once: what an Add costs once Gets have come.
func BenchmarkAddFiltered(b *testing.B) {
	o := benchOptions(addsPerTable, 0, false)
	benchAdds(b, true, func() *MemTable {
		m := mustNew(b, o)
		m.buildFilter(b)
		return m
	})
}

// addsPerTable is how many entries the Add benchmarks put in a memtable
// before they take a new one.
const addsPerTable = 1 << 18

// benchAdds adds b.N entries, in key order or random, to memtables from
// newTable (a new one every addsPerTable entries, untimed).
func benchAdds(b *testing.B, random bool, newTable func() *MemTable) {
	value := make([]byte, benchValueLen)
	m := newTable()
	rng := rand.New(rand.NewPCG(1, 2))
	var kbuf []byte
	n := 0
	b.SetBytes(benchKeyLen + benchValueLen)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if n == addsPerTable {
			b.StopTimer()
			m = newTable()
			n = 0
			b.StartTimer()
		}
		k := uint64(i)
		if random {
			k = rng.Uint64()
		}
		kbuf = benchKey(kbuf, k)
		if err := m.Add(uint64(i+1), base.KindSet, kbuf, value); err != nil {
			b.Fatal(err)
		}
		n++
	}
}

// BenchmarkAddConcurrent adds random keys from 2 goroutines, each reserving
// its entry first as the DB does.
func BenchmarkAddConcurrent(b *testing.B) {
	value := make([]byte, benchValueLen)
	for _, prot := range []int{0, 8} {
		b.Run(fmt.Sprintf("prot=%d", prot), func(b *testing.B) {
			const perTable = 1 << 18
			o := benchOptions(perTable, prot, false)
			rngs := [2]*rand.Rand{rand.New(rand.NewPCG(1, 9)), rand.New(rand.NewPCG(2, 9))}
			b.SetBytes(benchKeyLen + benchValueLen)
			b.ResetTimer()
			for done := 0; done < b.N; done += perTable {
				b.StopTimer()
				m := mustNew(b, o)
				n := min(perTable, b.N-done)
				b.StartTimer()
				var wg sync.WaitGroup
				for g := 0; g < 2; g++ {
					wg.Add(1)
					go func(g int, count int) {
						defer wg.Done()
						var kbuf []byte
						for i := 0; i < count; i++ {
							kbuf = benchKey(kbuf, rngs[g].Uint64())
							if !m.Reserve(EntrySize(len(kbuf), len(value))) {
								b.Error("reserve refused")
								return
							}
							if err := m.Add(uint64(2*i+g+1), base.KindSet, kbuf, value); err != nil {
								b.Error(err)
								return
							}
						}
					}(g, (n+1-g)/2)
				}
				wg.Wait()
			}
		})
	}
}

type benchTable struct {
	once sync.Once
	m    *MemTable
	keys []uint64
}

var benchTables [9]benchTable // by protection bytes

// sharedTable returns a memtable of benchEntries() random keys with the
// given protection, built once. Benchmarks toggle m.paranoid, which only
// selects the read paths, and the filter's readiness.
func sharedTable(b *testing.B, prot int) (*MemTable, []uint64) {
	bt := &benchTables[prot]
	bt.once.Do(func() {
		n := benchEntries()
		bt.m = mustNew(b, benchOptions(n, prot, false))
		rng := rand.New(rand.NewPCG(5, 6))
		value := make([]byte, benchValueLen)
		var kbuf []byte
		for len(bt.keys) < n {
			k := rng.Uint64()
			kbuf = benchKey(kbuf, k)
			if err := bt.m.Add(uint64(len(bt.keys)+1), base.KindSet, kbuf, value); err == nil {
				bt.keys = append(bt.keys, k)
			}
		}
	})
	return bt.m, bt.keys
}

// BenchmarkGetMiss looks up keys the memtable does not hold (a Get that
// goes on to the tables), with its filter and without.
func BenchmarkGetMiss(b *testing.B) {
	for _, filter := range []bool{true, false} {
		b.Run(fmt.Sprintf("filter=%t", filter), func(b *testing.B) {
			m, _ := sharedTable(b, 0)
			m.buildFilter(b)
			if !filter {
				m.filter.ready.Store(false)
				m.filter.after = -1 // never again
				defer m.filter.ready.Store(true)
			}
			rng := rand.New(rand.NewPCG(9, 10))
			var k [benchKeyLen]byte
			copy(k[8:], "00000001") // no key has this filler
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				binary.BigEndian.PutUint64(k[:], rng.Uint64())
				if _, _, _, found, err := m.Get(k[:], base.SeqNumMax); found || err != nil {
					b.Fatal("hit", err)
				}
			}
		})
	}
}

func BenchmarkGet(b *testing.B) {
	for _, prot := range []int{0, 8} {
		for _, paranoid := range []bool{false, true} {
			b.Run(fmt.Sprintf("prot=%d/paranoid=%t", prot, paranoid), func(b *testing.B) {
				m, keys := sharedTable(b, prot)
				m.paranoid = paranoid
				defer func() { m.paranoid = false }()
				rng := rand.New(rand.NewPCG(7, 8))
				var k [benchKeyLen]byte
				copy(k[8:], "00000000")
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					binary.BigEndian.PutUint64(k[:], keys[rng.IntN(len(keys))])
					if _, _, _, found, err := m.Get(k[:], base.SeqNumMax); !found || err != nil {
						b.Fatal("miss", err)
					}
				}
			})
		}
	}
}

func BenchmarkScan(b *testing.B) {
	for _, dir := range []string{"forward", "reverse"} {
		for _, prot := range []int{0, 8} {
			for _, paranoid := range []bool{false, true} {
				b.Run(fmt.Sprintf("%s/prot=%d/paranoid=%t", dir, prot, paranoid), func(b *testing.B) {
					m, _ := sharedTable(b, prot)
					it := m.NewIter(IterOptions{Validate: paranoid})
					defer it.Close()
					var sink int
					b.ResetTimer()
					if dir == "forward" {
						it.First()
						for i := 0; i < b.N; i++ {
							if !it.Next() {
								it.First()
							}
							sink += len(it.Key().UserKey) + len(it.Value())
						}
					} else {
						it.Last()
						for i := 0; i < b.N; i++ {
							if !it.Prev() {
								it.Last()
							}
							sink += len(it.Key().UserKey) + len(it.Value())
						}
					}
					if it.Error() != nil || sink == 0 {
						b.Fatal(it.Error())
					}
				})
			}
		}
	}
}

// BenchmarkValidate measures the flush-side full check (ns/op per Validate
// of the whole table, and ns/entry).
func BenchmarkValidate(b *testing.B) {
	for _, prot := range []int{0, 8} {
		b.Run(fmt.Sprintf("prot=%d", prot), func(b *testing.B) {
			m, keys := sharedTable(b, prot)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := m.Validate(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(keys)), "ns/entry")
		})
	}
}

// BenchmarkAddChecked is BenchmarkAdd's sequential case through AddChecked
// (8 batch protection bytes, computed outside the timer as a batch's Put
// would), beside Add, with and without the memtable's own protection: with
// it the check replaces Add's hashing, without it the check is new.
func BenchmarkAddChecked(b *testing.B) {
	value := make([]byte, benchValueLen)
	for _, prot := range []int{0, 8} {
		for _, checked := range []bool{false, true} {
			b.Run(fmt.Sprintf("prot=%d/checked=%t", prot, checked), func(b *testing.B) {
				const perTable = 1 << 18
				o := benchOptions(perTable, prot, false)
				o.ChecksumType = checksum.XXH3
				m := mustNew(b, o)
				keys := make([][]byte, perTable)
				us := make([]uint64, perTable)
				for i := range keys {
					keys[i] = benchKey(nil, uint64(i))
					us[i] = checksum.KVUnsequenced(checksum.XXH3, keys[i], uint8(base.KindSet), value)
				}
				n := 0
				b.SetBytes(benchKeyLen + benchValueLen)
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if n == perTable {
						b.StopTimer()
						m = mustNew(b, o)
						n = 0
						b.StartTimer()
					}
					var err error
					if checked {
						err = m.AddChecked(uint64(i+1), base.KindSet, keys[n], value, us[n], 8)
					} else {
						err = m.Add(uint64(i+1), base.KindSet, keys[n], value)
					}
					if err != nil {
						b.Fatal(err)
					}
					n++
				}
			})
		}
	}
}
