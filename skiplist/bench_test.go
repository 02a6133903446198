package skiplist

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"testing"
)

// Benchmarks use the memtable's shape: InternalKeys order, 16-byte user keys
// (8-byte big-endian number then 8 filler bytes, as db_bench makes them)
// plus the 8-byte trailer, 100-byte values. VIGIL_BENCH_ENTRIES sets the
// size of the lists that Get and scans run over (default 1M).

const (
	benchUserKey = 16
	benchValue   = 100
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
	buf = append(buf, "00000000"...)
	return binary.LittleEndian.AppendUint64(buf, 1<<8|1)
}

func newBenchList(b *testing.B, entries int, validate bool) *Skiplist {
	return newListFor(b, entries, benchUserKey, validate)
}

// newListFor is an InternalKeys list with room for entries of user keys up
// to userKeyLen bytes and benchValue-byte values.
func newListFor(b testing.TB, entries, userKeyLen int, validate bool) *Skiplist {
	arena, err := NewArena(entries*(MaxNodeSize(userKeyLen+8, benchValue)) + MinArenaSize)
	if err != nil {
		b.Fatal(err)
	}
	l, err := New(arena, Options{InternalKeys: true, Validate: validate})
	if err != nil {
		b.Fatal(err)
	}
	return l
}

func BenchmarkInsert(b *testing.B) {
	value := make([]byte, benchValue)
	for _, order := range []string{"seq", "random"} {
		for _, how := range []string{"add", "inserter"} {
			b.Run(order+"/"+how, func(b *testing.B) {
				const perList = 1 << 18
				l := newBenchList(b, perList, false)
				ins := l.NewInserter()
				rng := rand.New(rand.NewPCG(1, 2))
				var kbuf []byte
				n := 0
				b.SetBytes(benchUserKey + 8 + benchValue)
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if n == perList {
						b.StopTimer()
						l = newBenchList(b, perList, false)
						ins = l.NewInserter()
						n = 0
						b.StartTimer()
					}
					k := uint64(i)
					if order == "random" {
						k = rng.Uint64()
					}
					kbuf = benchKey(kbuf, k)
					var err error
					if how == "add" {
						err = l.Add(kbuf, value)
					} else {
						err = ins.Add(kbuf, value)
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

// BenchmarkInsertConcurrent runs random inserts from 2 goroutines into one
// list (a fresh list every 256K inserts, outside the timer).
func BenchmarkInsertConcurrent(b *testing.B) {
	value := make([]byte, benchValue)
	const perList = 1 << 18
	rngs := [2]*rand.Rand{rand.New(rand.NewPCG(1, 9)), rand.New(rand.NewPCG(2, 9))}
	b.SetBytes(benchUserKey + 8 + benchValue)
	b.ResetTimer()
	for done := 0; done < b.N; done += perList {
		b.StopTimer()
		l := newBenchList(b, perList, false)
		n := min(perList, b.N-done)
		b.StartTimer()
		var wg sync.WaitGroup
		for g := 0; g < 2; g++ {
			wg.Add(1)
			go func(rng *rand.Rand, count int) {
				defer wg.Done()
				var kbuf []byte
				for i := 0; i < count; i++ {
					kbuf = benchKey(kbuf, rng.Uint64())
					if err := l.Add(kbuf, value); err != nil {
						b.Error(err)
						return
					}
				}
			}(rngs[g], (n+1-g)/2)
		}
		wg.Wait()
	}
}

var (
	benchListOnce sync.Once
	benchList     *Skiplist
	benchKeys     []uint64
)

// sharedBenchList is a list of benchEntries() random keys, built once.
func sharedBenchList(b *testing.B) (*Skiplist, []uint64) {
	benchListOnce.Do(func() {
		n := benchEntries()
		benchList = newBenchList(b, n, false)
		rng := rand.New(rand.NewPCG(5, 6))
		value := make([]byte, benchValue)
		var kbuf []byte
		for len(benchKeys) < n {
			k := rng.Uint64()
			kbuf = benchKey(kbuf, k)
			if err := benchList.Add(kbuf, value); err == nil {
				benchKeys = append(benchKeys, k)
			}
		}
	})
	return benchList, benchKeys
}

func BenchmarkGet(b *testing.B) {
	l, keys := sharedBenchList(b)
	for _, validate := range []bool{false, true} {
		b.Run(fmt.Sprintf("validate=%t", validate), func(b *testing.B) {
			it := l.NewIter(validate)
			rng := rand.New(rand.NewPCG(7, 8))
			var ukey [benchUserKey]byte
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				binary.BigEndian.PutUint64(ukey[:], keys[rng.IntN(len(keys))])
				copy(ukey[8:], "00000000")
				if !it.SeekGESplit(ukey[:], ^uint64(0)) {
					b.Fatal("miss")
				}
			}
		})
	}
}

func BenchmarkScan(b *testing.B) {
	l, _ := sharedBenchList(b)
	for _, dir := range []string{"forward", "reverse"} {
		for _, validate := range []bool{false, true} {
			b.Run(fmt.Sprintf("%s/validate=%t", dir, validate), func(b *testing.B) {
				it := l.NewIter(validate)
				var sink int
				b.ResetTimer()
				if dir == "forward" {
					it.First()
					for i := 0; i < b.N; i++ {
						if !it.Next() {
							it.First()
						}
						sink += len(it.Key()) + len(it.Value())
					}
				} else {
					it.Last()
					for i := 0; i < b.N; i++ {
						if !it.Prev() {
							it.Last()
						}
						sink += len(it.Key()) + len(it.Value())
					}
				}
				if it.Error() != nil || sink == 0 {
					b.Fatal(it.Error())
				}
			})
		}
	}
}
