package wal

import (
	"path/filepath"
	"testing"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/vigildb/vigil/checksum"
)

// syncedAppendSize is a raft leader's append under sustained load: 64
// entries of 256 bytes and their keys (raftstore's StoreLogs).
const syncedAppendSize = 17 << 10

// syncedAppendSpan is the file space each sub-benchmark writes over
// before it starts again from the front: written and synced beforehand,
// so that every sync is of data alone, as in a recycled or reserved log.
const syncedAppendSpan = 32 << 20

// BenchmarkSyncedAppend is one writer appending a record and waiting for
// it to be durable, on disk: "bare" is the floor, a pwrite and an
// fdatasync of the same bytes at consecutive offsets of a file whose
// blocks are already durable; "writer" is the same through a Writer over
// reserved zeros, as the DB makes a synced write (WriteRecordToSync, then
// SyncToAfter with work, a stand-in for the DB's memtable insert). The
// difference is what the Writer costs a synced write beyond the device.
func BenchmarkSyncedAppend(b *testing.B) {
	rec := pattern(7, syncedAppendSize)
	b.Run("bare", func(b *testing.B) {
		f, err := vfs.Default.Create(filepath.Join(b.TempDir(), "bare"))
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteAt(make([]byte, syncedAppendSpan), 0); err != nil {
			b.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
		b.SetBytes(int64(len(rec)))
		b.ResetTimer()
		off := int64(0)
		for b.Loop() {
			if off+int64(len(rec)) > syncedAppendSpan {
				off = 0
			}
			if _, err := f.WriteAt(rec, off); err != nil {
				b.Fatal(err)
			}
			if err := f.SyncData(); err != nil {
				b.Fatal(err)
			}
			off += int64(len(rec))
		}
	})
	for _, work := range []bool{false, true} {
		name := "writer"
		if work {
			name += "/work"
		}
		b.Run(name, func(b *testing.B) {
			dir := b.TempDir()
			var w *Writer
			n := 0
			start := func() {
				if w != nil {
					if err := w.Close(); err != nil {
						b.Fatal(err)
					}
				}
				n++
				f, err := vfs.Default.Create(filepath.Join(dir, "log"))
				if err != nil {
					b.Fatal(err)
				}
				if w, err = NewWriter(f, "bench", uint64(n), checksum.XXH3); err != nil {
					b.Fatal(err)
				}
				if err := w.Sync(); err != nil {
					b.Fatal(err)
				}
				w.SetReserve(syncedAppendSpan)
				if err := w.ReserveAhead(syncedAppendSpan); err != nil {
					b.Fatal(err)
				}
			}
			start() // before the first b.Loop, which starts the timer
			var sink int
			fn := func() {
				for i := range 10000 { // some µs of CPU, as the DB's insert of a raft append
					sink += i * i
				}
			}
			if !work {
				fn = nil
			}
			b.SetBytes(int64(len(rec)))
			for b.Loop() {
				if w.Size()+int64(len(rec))+1024 > syncedAppendSpan {
					b.StopTimer()
					start()
					b.StartTimer()
				}
				end, err := w.WriteRecordToSync(rec)
				if err == nil {
					err = w.SyncToAfter(end, fn)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			_ = w.Close()
			_ = sink
		})
	}
}
