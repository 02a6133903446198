package vigil

import (
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/vigildb/vigil/internal/base"
	"github.com/vigildb/vigil/wal"
)

// A batch too large for any memtable is refused before the WAL, and the DB
// stays writable. (Faking the batch's memtable estimate stands in for a
// ~4 GiB batch, which would need that much memory to build.)
func TestBatchTooBigForAnyMemtable(t *testing.T) {
	fs := vfs.NewMem()
	db := openMem(t, fs, nil)
	defer db.Close()
	b := db.NewBatch()
	b.Put([]byte("k"), []byte("v"))
	b.memSize = 5 << 30
	before := db.Metrics().WAL.Records
	if err := db.Apply(b, nil); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("Apply of a batch needing 5 GiB of memtable = %v, want ErrInvalidArgument", err)
	}
	if got := db.Metrics().WAL.Records; got != before {
		t.Fatalf("the refused batch reached the WAL (%d -> %d records)", before, got)
	}
	if err := db.Put([]byte("after"), []byte("x"), Sync); err != nil {
		t.Fatalf("DB not writable after the refused batch: %v", err)
	}
	mustNotFound(t, db, "k")
}

// A WAL written before Batch refused empty and inverted ranges may hold
// them: it must still open, flush, and keep everything else. The batch is
// built with the internal encoder, as an older Vigil would have.
func TestEmptyRangeTombstoneInWALStillOpens(t *testing.T) {
	for _, flushFirst := range []bool{true, false} {
		t.Run(fmt.Sprintf("flush=%v", flushFirst), func(t *testing.T) {
			fs := vfs.NewMem()
			db := openMem(t, fs, nil)
			b := db.NewBatch()
			b.Put([]byte("a"), []byte("1"))
			b.add(base.KindRangeDelete, []byte("k"), []byte("k"), true)
			b.add(base.KindRangeDelete, []byte("z"), []byte("b"), true)
			b.Put([]byte("m"), []byte("2"))
			if err := db.Apply(b, Sync); err != nil {
				t.Fatal(err)
			}
			if flushFirst {
				if err := db.Flush(); err != nil {
					t.Fatalf("Flush of a memtable holding empty range tombstones: %v", err)
				}
				if err := db.Put([]byte("after"), []byte("x"), Sync); err != nil {
					t.Fatalf("DB read-only after the flush: %v", err)
				}
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			db = openMem(t, fs, nil)
			defer db.Close()
			mustGet(t, db, "a", "1")
			mustGet(t, db, "m", "2")
			if err := db.Put([]byte("later"), []byte("y"), Sync); err != nil {
				t.Fatalf("DB read-only after recovery: %v", err)
			}
			if err := db.Flush(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// copyFS copies every file of dir from src into a new MemFS: the state of
// the disk at a crash, where src holds everything written (a plain MemFS).
func copyFS(t *testing.T, src vfs.FS, dir string) vfs.FS {
	t.Helper()
	dst := vfs.NewMem()
	if err := dst.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	names, err := src.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if n == "LOCK" {
			continue
		}
		if _, err := vfs.Clone(src, dst, src.PathJoin(dir, n), dst.PathJoin(dir, n)); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// waitWALHeaders waits until every WAL of dir holds at least its file
// header.
func waitWALHeaders(t *testing.T, fs vfs.FS, dir string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		done := true
		for _, l := range walsOf(t, fs, dir) {
			if st, err := fs.Stat(l); err != nil || st.Size() < wal.FileHeaderSize {
				done = false
			}
		}
		if done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("a WAL still has no header after 10s")
		}
	}
}

// walsOf lists the WAL files of dir, oldest first.
func walsOf(t *testing.T, fs vfs.FS, dir string) []string {
	names, err := fs.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	var logs []string
	for _, n := range names {
		if strings.HasSuffix(n, ".log") {
			logs = append(logs, fs.PathJoin(dir, n))
		}
	}
	sort.Strings(logs)
	return logs
}

// A missing or truncated WAL that is not the last cannot be skipped: the
// recovered state would not be a prefix of the commit order, and synced
// writes in it would be lost silently. Flushes are held back so that
// several WALs stay live, then the disk is copied as a crash would leave it.
func TestHolesAcrossWALs(t *testing.T) {
	fs := vfs.NewMem()
	db := openMem(t, fs, &Options{WriteBufferSize: 64 << 10, MaxImmutableMemtables: 8})
	block := make(chan struct{})
	db.testingHooks = &testingHooks{beforeFlush: func(flushable) { <-block }}
	const n = 400
	val := strings.Repeat("v", 700)
	for i := 0; i < n; i++ {
		if err := db.Put([]byte(fmt.Sprintf("k%04d", i)), []byte(val), Sync); err != nil {
			t.Fatal(err)
		}
	}
	// The image is taken once every WAL has its header: a WAL made ahead
	// of its use gets it from its flusher a moment after it is created,
	// and an image of that moment is a crash that AbsoluteConsistency
	// rightly refuses (a torn header), which the "intact" cases below do
	// not mean to test.
	waitWALHeaders(t, fs, "db")
	crashed := copyFS(t, fs, "db")
	close(block)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	logs := walsOf(t, crashed, "db")
	if len(logs) < 4 {
		t.Fatalf("only %d WALs live; the test needs at least 4", len(logs))
	}
	middle := logs[len(logs)/2]
	cases := []struct {
		name   string
		damage func(fs vfs.FS)
	}{
		{"intact", func(vfs.FS) {}},
		{"middle WAL deleted", func(fs vfs.FS) {
			if err := fs.Remove(middle); err != nil {
				t.Fatal(err)
			}
		}},
		{"middle WAL truncated", func(fs vfs.FS) { truncateFile(t, fs, middle, 0.6) }},
		{"middle WAL truncated to its header", func(fs vfs.FS) { truncateFile(t, fs, middle, 0) }},
		{"first WAL truncated", func(fs vfs.FS) { truncateFile(t, fs, logs[0], 0.5) }},
	}
	for _, c := range cases {
		for _, mode := range []WALRecoveryMode{WALRecoverPointInTime, WALTolerateCorruptedTail, WALAbsoluteConsistency, WALSkipAnyCorrupted} {
			t.Run(fmt.Sprintf("%s/%s", c.name, mode), func(t *testing.T) {
				cfs := copyFS(t, crashed, "db")
				c.damage(cfs)
				db, err := Open("db", &Options{FS: cfs, WALRecoveryMode: mode})
				if c.name != "intact" && mode != WALSkipAnyCorrupted {
					if !errors.Is(err, ErrCorruption) {
						if err == nil {
							db.Close()
						}
						t.Fatalf("Open after %s = %v, want ErrCorruption", c.name, err)
					}
					return
				}
				if err != nil {
					t.Fatalf("Open: %v", err)
				}
				defer db.Close()
				missing := 0
				for i := 0; i < n; i++ {
					if _, err := db.Get([]byte(fmt.Sprintf("k%04d", i))); err != nil {
						missing++
					}
				}
				if c.name == "intact" && missing > 0 {
					t.Fatalf("%d of %d synced keys missing from an intact crash image", missing, n)
				}
				if mode == WALSkipAnyCorrupted && c.name != "intact" {
					if m := db.Metrics(); m.Recovery.Skipped == 0 && m.Recovery.DroppedRecords == 0 {
						t.Fatalf("skip-any lost %d keys but Metrics.Recovery counts nothing: %+v", missing, m.Recovery)
					}
				}
			})
		}
	}
}

// truncateFile cuts name to the WAL header plus frac of the rest.
func truncateFile(t *testing.T, fs vfs.FS, name string, frac float64) {
	t.Helper()
	f, err := fs.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	const header = 24
	// A fraction of the log's records, not of the file: past them lie the
	// zero reserve's zeros (as much as the WAL before held, when it was
	// reserved ahead), and cutting only zeros loses nothing.
	end := len(b)
	for end > header && b[end-1] == 0 {
		end--
	}
	keep := header + int(frac*float64(end-header))
	w, err := fs.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(b[:keep]); err != nil {
		t.Fatal(err)
	}
	if err := w.Sync(); err != nil {
		t.Fatal(err)
	}
	w.Close()
}
