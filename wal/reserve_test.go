package wal

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/cockroachdb/pebble/vfs/errorfs"
	"github.com/vigildb/vigil/checksum"
)

// reserveLog writes n records of size bytes through a writer with a zero
// reserve of max bytes, syncing after each, and returns the file's bytes,
// the writer's stats, the log's logical size, the records, the file's
// counters, and what the reserve rule predicts from the records' end
// offsets: the zeros written and the syncs that are SyncData.
func reserveLog(t *testing.T, fs vfs.FS, name string, max int64, n, size int) ([]byte, WriterStats, int64, [][]byte, *countingFile, reservePrediction) {
	t.Helper()
	f, err := fs.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	cf := &countingFile{File: f}
	w, err := NewWriter(cf, name, 3, checksum.XXH3)
	if err != nil {
		t.Fatal(err)
	}
	w.SetReserve(max)
	var recs [][]byte
	var p reservePrediction
	durable, next := int64(0), min(int64(minReserve), max)
	for i := range n {
		rec := pattern(i, size)
		recs = append(recs, rec)
		end, err := w.WriteRecord(rec)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.SyncTo(end); err != nil {
			t.Fatal(err)
		}
		if end <= durable {
			p.dataSyncs++
		} else {
			durable = max64(durable, end+next)
			p.reserved += next
			next = min(2*next, max)
		}
	}
	size64 := w.Size()
	st := w.Stats()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	rf, err := fs.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer rf.Close()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(rf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), st, size64, recs, cf, p
}

type reservePrediction struct{ reserved, dataSyncs int64 }

func max64(a, b int64) int64 { return max(a, b) }

// TestReserveSyncsData: with a reserve, a synced append that lands in the
// durable zeros is a SyncData; the reserve grows 64 KiB, 128 KiB, ... up to
// its bound, only when the log outgrows it; the file is the log followed by
// zeros, which every mode reads as the end of the log.
func TestReserveSyncsData(t *testing.T) {
	fs := vfs.NewMem()
	const max = 256 << 10
	data, st, size, recs, cf, p := reserveLog(t, fs, "log", max, 1200, 700)
	// 1200 records of 707 bytes, ~830 KiB: reserves of 64, 128, 256, 256
	// and 256 KiB, each written by the full sync of the record that
	// outgrew the one before; every other sync is a SyncData.
	if p.reserved != int64(64+128+256+256+256)<<10 {
		t.Fatalf("the prediction itself is off: %+v", p)
	}
	if st.Reserved != p.reserved || st.DataSyncs != p.dataSyncs || st.Syncs != 1200 {
		// 1200 SyncTo, one sync each; Close finds nothing left to sync.
		t.Fatalf("stats %+v, predicted %+v", st, p)
	}
	if cf.dataSyncs != int(st.DataSyncs) {
		t.Fatalf("the file saw %d SyncData calls, the writer counted %d", cf.dataSyncs, st.DataSyncs)
	}
	if int64(len(data)) <= size || slices.ContainsFunc(data[size:], func(b byte) bool { return b != 0 }) {
		t.Fatalf("file of %d bytes, log of %d: want the log followed by zeros only", len(data), size)
	}
	for _, mode := range allModes {
		res := readAll(t, data, mode)
		if res.err != nil || res.stopped != nil || !equalRecs(res.recs, recs) || res.stats.UnwrittenBytes != int64(len(data))-size ||
			res.stats.DroppedBytes != 0 || res.r.Offset() != size {
			t.Fatalf("%s: err %v stopped %v, %d records, stats %+v", mode, res.err, res.stopped, len(res.recs), res.stats)
		}
	}
}

// TestReserveOnlyForWaitedSyncs: syncs nobody waits for (bytes-per-sync,
// Close) never write zeros, and a writer without a reserve never calls
// SyncData.
func TestReserveOnlyForWaitedSyncs(t *testing.T) {
	for _, reserve := range []int64{0, 1 << 20} {
		fs := vfs.NewMem()
		f, _ := fs.Create("log")
		cf := &countingFile{File: f}
		w, _ := NewWriter(cf, "log", 3, checksum.XXH3)
		w.SetReserve(reserve)
		w.SetBytesPerSync(64 << 10)
		for i := range 500 {
			if _, err := w.WriteRecord(pattern(i, 1000)); err != nil {
				t.Fatal(err)
			}
		}
		size := w.Size()
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		st := w.Stats()
		fi, _ := fs.Stat("log")
		if st.Reserved != 0 || st.DataSyncs != 0 || cf.dataSyncs != 0 || fi.Size() != size || st.Syncs == 0 {
			t.Fatalf("reserve %d: stats %+v, file %d bytes, log %d", reserve, st, fi.Size(), size)
		}
	}
	fs := vfs.NewMem()
	_, st, _, _, cf, _ := reserveLog(t, fs, "log", 0, 50, 100)
	if st.DataSyncs != 0 || cf.dataSyncs != 0 || st.Reserved != 0 || st.Syncs != 50 {
		t.Fatalf("no reserve: stats %+v", st)
	}
}

// TestReserveCrash: a crash (the strict file system keeps only what was
// synced) after synced and unsynced appends into the reserve leaves every
// synced record readable in every mode, AbsoluteConsistency included, and
// nothing of the unsynced ones but what a torn tail may hold.
func TestReserveCrash(t *testing.T) {
	for _, unsynced := range []int{0, 1, 5, 60} {
		fs := vfs.NewStrictMem()
		f, _ := fs.Create("log")
		dir, _ := fs.OpenDir("")
		if err := dir.Sync(); err != nil {
			t.Fatal(err)
		}
		dir.Close()
		w, _ := NewWriter(f, "log", 3, checksum.XXH3)
		w.SetReserve(1 << 20)
		var recs [][]byte
		for i := range 40 {
			rec := pattern(i, 900)
			recs = append(recs, rec)
			end, _ := w.WriteRecord(rec)
			if err := w.SyncTo(end); err != nil {
				t.Fatal(err)
			}
		}
		for i := range unsynced {
			if _, err := w.WriteRecord(pattern(100+i, 900)); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		fs.SetIgnoreSyncs(true)
		_ = w.Close()
		fs.ResetToSyncedState()
		fs.SetIgnoreSyncs(false)
		rf, err := fs.Open("log")
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		_, _ = buf.ReadFrom(rf)
		rf.Close()
		for _, mode := range allModes {
			res := readAll(t, buf.Bytes(), mode)
			if res.err != nil || res.stopped != nil || !equalRecs(res.recs, recs) || res.stats.UnwrittenBytes == 0 {
				t.Fatalf("%d unsynced, %s: err %v stopped %v, %d records, stats %+v", unsynced, mode, res.err, res.stopped, len(res.recs), res.stats)
			}
		}
	}
}

// TestReserveWriteError: a failed write of the reserve fails the writer
// (sticky) and the waiting SyncTo, as a failed sync does.
func TestReserveWriteError(t *testing.T) {
	mem := vfs.NewMem()
	fs := errorfs.Wrap(mem, errorfs.InjectorFunc(func(op errorfs.Op, path string) error {
		if op == errorfs.OpFileWriteAt {
			return errorfs.ErrInjected
		}
		return nil
	}))
	f, _ := fs.Create("log")
	w, _ := NewWriter(f, "log", 3, checksum.XXH3)
	w.SetReserve(1 << 20)
	end, _ := w.WriteRecord([]byte("x"))
	if err := w.SyncTo(end); !errors.Is(err, errorfs.ErrInjected) {
		t.Fatalf("SyncTo: %v", err)
	}
	if _, err := w.WriteRecord([]byte("y")); !errors.Is(err, errorfs.ErrInjected) {
		t.Fatalf("WriteRecord after the failure: %v", err)
	}
	_ = w.Close()
}

// TestReserveOSFile runs the reserve on the operating system's file system:
// positioned writes of zeros beyond the appends, fdatasync over them.
func TestReserveOSFile(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "000003.log")
	data, st, size, recs, _, p := reserveLog(t, vfs.Default, name, 1<<20, 300, 500)
	if st.DataSyncs != p.dataSyncs || st.Reserved != p.reserved || st.DataSyncs == 0 {
		t.Fatalf("stats %+v, predicted %+v", st, p)
	}
	fi, err := os.Stat(name)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() != int64(len(data)) || fi.Size() <= size {
		t.Fatalf("file %d bytes (%d read), log %d", fi.Size(), len(data), size)
	}
	res := readAll(t, data, AbsoluteConsistency)
	if res.err != nil || !equalRecs(res.recs, recs) || res.stats.UnwrittenBytes != int64(len(data))-size {
		t.Fatalf("err %v, %d records, stats %+v", res.err, len(res.recs), res.stats)
	}
}

// TestNoReserveWithoutChecksums: a log without checksums keeps no zero
// reserve, whatever SetReserve asks: the file ends at the log's end after
// synced appends, none of them a SyncData.
func TestNoReserveWithoutChecksums(t *testing.T) {
	for _, ct := range []checksum.Type{checksum.None, checksum.XXH3} {
		fs := vfs.NewMem()
		f, _ := fs.Create("log")
		w, err := NewWriter(f, "log", 3, ct)
		if err != nil {
			t.Fatal(err)
		}
		w.SetReserve(1 << 20)
		for i := range 50 {
			end, err := w.WriteRecord(pattern(i, 1000))
			if err != nil {
				t.Fatal(err)
			}
			if err := w.SyncTo(end); err != nil {
				t.Fatal(err)
			}
		}
		size := w.Size()
		fi, err := fs.Stat("log")
		if err != nil {
			t.Fatal(err)
		}
		st := w.Stats()
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if ct == checksum.None && (st.Reserved != 0 || st.DataSyncs != 0 || fi.Size() != size) {
			t.Fatalf("%s: reserved %d, data syncs %d, file %d bytes for a %d-byte log", ct, st.Reserved, st.DataSyncs, fi.Size(), size)
		}
		if ct != checksum.None && (st.Reserved == 0 || fi.Size() <= size) {
			t.Fatalf("%s: reserved %d, file %d bytes for a %d-byte log: the reserve is missing", ct, st.Reserved, fi.Size(), size)
		}
	}
}
