package wal

import (
	"bytes"
	"errors"
	"slices"
	"testing"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/vigildb/vigil/checksum"
	"github.com/vigildb/vigil/internal/base"
)

// TestReserveAhead: zeros reserved before the first record make every
// synced append that lands in them a SyncData, with no extension until the
// log outgrows them; the file reads back as the records, then unwritten
// space, in every mode. Without a reserve, or after a record, it does
// nothing or refuses.
func TestReserveAhead(t *testing.T) {
	fs := vfs.NewMem()
	f, _ := fs.Create("log")
	cf := &countingFile{File: f}
	w, _ := NewWriter(cf, "log", 3, checksum.XXH3)
	if err := w.Sync(); err != nil { // the header, then the reserve, as the DB's createWALFile does
		t.Fatal(err)
	}
	w.SetReserve(64 << 10)
	const ahead = 256 << 10
	if err := w.ReserveAhead(ahead); err != nil {
		t.Fatal(err)
	}
	var recs [][]byte
	for i := range 300 { // 300 × ~1 KiB: inside the 256 KiB ahead
		rec := pattern(i, 800)
		recs = append(recs, rec)
		end, err := w.WriteRecord(rec)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.SyncTo(end); err != nil {
			t.Fatal(err)
		}
	}
	st := w.Stats()
	if st.Reserved != ahead || st.DataSyncs != 300 || st.WaitedSyncs != 301 {
		t.Fatalf("stats %+v: want %d reserved ahead, 300 synced appends all SyncData (and the header's sync)", st, ahead)
	}
	if err := w.ReserveAhead(ahead); !errors.Is(err, base.ErrInvalidArgument) {
		t.Fatalf("ReserveAhead after records: %v, want ErrInvalidArgument", err)
	}
	size := w.Size()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	rf, _ := fs.Open("log")
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(rf)
	rf.Close()
	data := buf.Bytes()
	if int64(len(data)) != FileHeaderSize+ahead || slices.ContainsFunc(data[size:], func(b byte) bool { return b != 0 }) {
		t.Fatalf("file of %d bytes (log %d): want header + %d bytes, zeros past the log", len(data), size, ahead)
	}
	for _, mode := range allModes {
		res := readAll(t, data, mode)
		if res.err != nil || !equalRecs(res.recs, recs) || res.stats.UnwrittenBytes != int64(len(data))-size {
			t.Fatalf("%s: err %v, %d records, stats %+v", mode, res.err, len(res.recs), res.stats)
		}
	}

	// No reserve (none set, or a log without checksums): nothing written.
	for _, ct := range []checksum.Type{checksum.XXH3, checksum.None} {
		f, _ := fs.Create("plain")
		w, _ := NewWriter(f, "plain", 4, ct)
		if ct == checksum.None {
			w.SetReserve(1 << 20)
		}
		if err := w.ReserveAhead(ahead); err != nil || w.Stats().Reserved != 0 {
			t.Fatalf("%s: ReserveAhead without a reserve: %v, stats %+v", ct, err, w.Stats())
		}
		_ = w.Close()
	}
}

// TestSyncToAfter: when the flusher makes the round, the work runs once,
// while the sync it waits for is in progress, and also when there is
// nothing to sync or the writer failed. (The caller's own rounds:
// TestSyncDirect.)
func TestSyncToAfter(t *testing.T) {
	defer func(v bool) { directRounds = v }(directRounds)
	directRounds = false
	fs := vfs.NewMem()
	f, _ := fs.Create("log")
	cf := &countingFile{File: f, gate: make(chan struct{}), inSync: make(chan struct{}, 1)}
	w, _ := NewWriter(cf, "log", 3, checksum.XXH3)
	end, _ := w.WriteRecord(pattern(1, 100))
	runs := 0
	done := make(chan error)
	go func() {
		done <- w.SyncToAfter(end, func() {
			runs++
			<-cf.inSync // the sync started before the work ended
			cf.gate <- struct{}{}
		})
	}()
	if err := <-done; err != nil || runs != 1 {
		t.Fatalf("SyncToAfter: %v after %d runs of the work", err, runs)
	}
	cf.mu.Lock()
	cf.gate = nil
	cf.failSync = errTestIO
	cf.mu.Unlock()
	if err := w.SyncToAfter(end, func() { runs++ }); err != nil || runs != 2 {
		t.Fatalf("SyncToAfter of a synced offset: %v after %d runs", err, runs)
	}
	end, _ = w.WriteRecord(pattern(2, 100))
	if err := w.SyncToAfter(end, func() { runs++ }); !errors.Is(err, errTestIO) || runs != 3 {
		t.Fatalf("SyncToAfter with a failing sync: %v after %d runs", err, runs)
	}
	if err := w.SyncToAfter(end, func() { runs++ }); !errors.Is(err, errTestIO) || runs != 4 {
		t.Fatalf("SyncToAfter on a failed writer: %v after %d runs", err, runs)
	}
	_ = w.Close()
}
