package wal

import (
	"bytes"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/vigildb/vigil/checksum"
)

// benchLogLimit is where the write benchmarks rotate to a new log, as the DB
// does, so long runs on MemFS do not hold gigabytes.
const benchLogLimit = 64 << 20

type benchLog struct {
	b   *testing.B
	fs  vfs.FS
	dir string
	n   int
	w   *Writer
	ct  checksum.Type
}

func (l *benchLog) rotate() {
	if l.w != nil {
		if err := l.w.Close(); err != nil {
			l.b.Fatal(err)
		}
		_ = l.fs.Remove(l.fs.PathJoin(l.dir, fmt.Sprintf("%06d.log", l.n)))
	}
	l.n++
	f, err := l.fs.Create(l.fs.PathJoin(l.dir, fmt.Sprintf("%06d.log", l.n)))
	if err != nil {
		l.b.Fatal(err)
	}
	if l.w, err = NewWriter(f, "bench", uint64(l.n), l.ct); err != nil {
		l.b.Fatal(err)
	}
}

// BenchmarkWriteRecord measures append throughput: WriteRecord alone (the
// flusher writes in the background; the final Flush is timed) or followed
// by SyncTo (one fsync per record, no concurrency to share it), on MemFS
// and on the real file system in a temp dir.
func BenchmarkWriteRecord(b *testing.B) {
	for _, fsName := range []string{"mem", "disk"} {
		for _, size := range []int{100, 4096} {
			for _, sync := range []bool{false, true} {
				b.Run(fmt.Sprintf("fs=%s/size=%d/sync=%v", fsName, size, sync), func(b *testing.B) {
					fs, dir := vfs.FS(vfs.NewMem()), ""
					if fsName == "disk" {
						fs, dir = vfs.Default, b.TempDir()
					}
					l := &benchLog{b: b, fs: fs, dir: dir, ct: checksum.XXH3}
					l.rotate()
					rec := pattern(1, size)
					b.SetBytes(int64(size))
					b.ReportAllocs()
					for b.Loop() {
						end, err := l.w.WriteRecord(rec)
						if err != nil {
							b.Fatal(err)
						}
						if sync {
							if err := l.w.SyncTo(end); err != nil {
								b.Fatal(err)
							}
						}
						if end > benchLogLimit {
							b.StopTimer()
							l.rotate()
							b.StartTimer()
						}
					}
					if err := l.w.Flush(); err != nil {
						b.Fatal(err)
					}
					b.StopTimer()
					s := l.w.Stats()
					b.ReportMetric(float64(s.Writes)/float64(s.Records), "writes/record")
					if err := l.w.Close(); err != nil {
						b.Fatal(err)
					}
				})
			}
		}
	}
}

// BenchmarkWriteRecordChecksum isolates the cost of WriteRecord (copy and
// checksum) per checksum type, with a file that discards.
func BenchmarkWriteRecordChecksum(b *testing.B) {
	for _, ct := range allTypes {
		for _, size := range []int{100, 4096} {
			b.Run(fmt.Sprintf("type=%s/size=%d", ct, size), func(b *testing.B) {
				w, _ := NewWriter(discardFile{}, "bench", 1, ct)
				rec := pattern(1, size)
				b.SetBytes(int64(size))
				b.ReportAllocs()
				for b.Loop() {
					if _, err := w.WriteRecord(rec); err != nil {
						b.Fatal(err)
					}
				}
				_ = w.Close()
			})
		}
	}
}

// BenchmarkGroupCommit: many goroutines each append a record (under a
// commit mutex, as the DB does) and wait for it to be durable. syncs/op
// below 1 is group commit at work. In think=100µs the writers each spend
// 100 µs elsewhere (a sleep) between their writes, so that they do not
// come straight back after their fsync: waiting for them (gather) must not
// cost the others that time.
func BenchmarkGroupCommit(b *testing.B) {
	for _, c := range []struct {
		fs    string
		think time.Duration
	}{{"mem", 0}, {"disk", 0}, {"disk", 100 * time.Microsecond}} {
		name := "fs=" + c.fs
		if c.think > 0 {
			name += "/think=" + c.think.String()
		}
		b.Run(name, func(b *testing.B) {
			fs, dir := vfs.FS(vfs.NewMem()), ""
			if c.fs == "disk" {
				fs, dir = vfs.Default, b.TempDir()
			}
			l := &benchLog{b: b, fs: fs, dir: dir, ct: checksum.XXH3}
			l.rotate()
			var mu sync.Mutex
			rec := pattern(1, 100)
			b.SetBytes(int64(len(rec)))
			b.SetParallelism(8)
			if c.think > 0 {
				b.SetParallelism(4) // 8 writers on 2 processors
			}
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					mu.Lock()
					end, err := l.w.WriteRecord(rec)
					mu.Unlock()
					if err == nil {
						err = l.w.SyncTo(end)
					}
					if err != nil {
						b.Error(err)
						return
					}
					if c.think > 0 {
						time.Sleep(c.think)
					}
				}
			})
			b.StopTimer()
			s := l.w.Stats()
			b.ReportMetric(float64(s.Syncs)/float64(max(s.Records, 1)), "syncs/op")
			if s.Gathers > 0 {
				b.ReportMetric(float64(s.GatherWait.Nanoseconds())/float64(s.Gathers), "ns/gather")
				b.ReportMetric(float64(s.Gathers)/float64(max(s.Syncs, 1)), "gathers/sync")
			}
			_ = l.w.Close()
		})
	}
}

// BenchmarkReader measures reading a 16 MiB log back (PointInTime).
func BenchmarkReader(b *testing.B) {
	for _, size := range []int{100, 4096} {
		b.Run(fmt.Sprintf("size=%d", size), func(b *testing.B) {
			var recs [][]byte
			for n := 0; n < 16<<20; n += size {
				recs = append(recs, pattern(len(recs), size))
			}
			data, _ := writeLog(b, 1, checksum.XXH3, recs)
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				r, err := NewReader(bytes.NewReader(data), "bench", PointInTime)
				if err != nil {
					b.Fatal(err)
				}
				n := 0
				for {
					_, err := r.Next()
					if err == io.EOF {
						break
					}
					if err != nil {
						b.Fatal(err)
					}
					n++
				}
				if n != len(recs) {
					b.Fatalf("read %d records, want %d", n, len(recs))
				}
			}
		})
	}
}
