package tests

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/cockroachdb/pebble/vfs/errorfs"
	"github.com/vigildb/vigil"
	"github.com/vigildb/vigil/internal/invariants"
	"github.com/vigildb/vigil/internal/vfsutil"
)

// ingestSetup fills a DB for the ingestion tests: tables at two levels and
// a synced memtable, all overlapping the ingested range, and writes the
// external tables (keys k00100..k00199, values "ext"). It returns the DB's
// content before and after the ingestion.
func ingestSetup(t *testing.T, fs vfs.FS, db *vigil.DB, excise bool) (before, after map[string]string) {
	t.Helper()
	put := func(i int, v string) {
		if err := db.Put([]byte(fmt.Sprintf("k%05d", i)), []byte(v), nil); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 400; i += 2 {
		put(i, "table")
	}
	if err := db.Compact(nil, nil); err != nil {
		t.Fatal(err)
	}
	for i := 1; i < 400; i += 4 {
		put(i, "l0")
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	for i := 3; i < 400; i += 8 {
		put(i, "mem") // overlaps the ingestion: flushed by it
	}
	if err := db.SyncWAL(); err != nil {
		t.Fatal(err)
	}
	var err error
	if before, err = dump(db); err != nil {
		t.Fatal(err)
	}
	after = make(map[string]string, len(before))
	for k, v := range before {
		after[k] = v
	}
	if excise {
		for k := range after {
			if k >= "k00100" && k < "k00300" {
				delete(after, k)
			}
		}
	}
	for f := 0; f < 2; f++ {
		w, err := vigil.NewExternalWriter(fs, fmt.Sprintf("ext%d.sst", f), &vigil.ExternalWriterOptions{BlockSize: 512})
		if err != nil {
			t.Fatal(err)
		}
		for i := 100 + 100*f; i < 200+100*f; i += 3 {
			k := fmt.Sprintf("k%05d", i)
			if err := w.Set([]byte(k), []byte("ext")); err != nil {
				t.Fatal(err)
			}
			after[k] = "ext"
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return before, after
}

func runIngest(db *vigil.DB, excise bool) error {
	paths := []string{"ext0.sst", "ext1.sst"}
	if excise {
		return db.IngestAndExcise(paths, []byte("k00100"), []byte("k00300"))
	}
	return db.Ingest(paths)
}

// checkIngestOutcome reopens the DB and checks that it holds the state
// before or after the ingestion, exactly, verifies, and that every table
// in the directory is live (files an interrupted ingestion linked are
// deleted at Open). It returns whether the ingestion is in.
func checkIngestOutcome(t *testing.T, fs vfs.FS, before, after map[string]string, what string) bool {
	t.Helper()
	// No compactions: their obsolete inputs would be deleted while the
	// directory is counted below.
	db, err := vigil.Open("db", &vigil.Options{FS: fs, DisableAutomaticCompactions: true, WriteBufferSize: 256 << 10, BlockCacheSize: 1 << 20})
	if err != nil {
		t.Fatalf("%s: reopen: %v", what, err)
	}
	defer db.Close()
	got, err := dump(db)
	if err != nil {
		t.Fatalf("%s: read: %v", what, err)
	}
	in := equalMaps(got, after)
	if !in && !equalMaps(got, before) {
		var diff []string
		for k, v := range after {
			if got[k] != v {
				diff = append(diff, fmt.Sprintf("%s=%q (after: %q, before: %q)", k, got[k], v, before[k]))
			}
		}
		if len(diff) > 5 {
			diff = diff[:5]
		}
		t.Fatalf("%s: %d keys, neither the state before the ingestion (%d keys) nor after (%d); e.g. %v",
			what, len(got), len(before), len(after), diff)
	}
	if err := db.Verify(); err != nil {
		t.Fatalf("%s: Verify: %v", what, err)
	}
	live := 0
	for _, l := range db.Metrics().Levels {
		live += l.NumFiles
	}
	names, _ := fs.List("db")
	tables := 0
	for _, n := range names {
		if strings.HasSuffix(n, ".sst") {
			tables++
		}
	}
	if tables != live {
		t.Fatalf("%s: %d tables in the directory, %d live: an orphan survived Open", what, tables, live)
	}
	// And the DB goes on: a write over an ingested key wins.
	if err := db.Put([]byte("k00100"), []byte("later"), nil); err != nil {
		t.Fatal(err)
	}
	if v, err := db.Get([]byte("k00100")); err != nil || string(v) != "later" {
		t.Fatalf("%s: Get after a later write = %q, %v", what, v, err)
	}
	return in
}

// TestCrashDuringIngest crashes (strict MemFS: unsynced data lost) at every
// file-system write of an Ingest and of an IngestAndExcise, which flush an
// overlapping memtable, link two files, write the WAL record, sync, and
// write the MANIFEST, and then in the Close after it: after each, the
// reopened DB holds all of the files or none (all once Ingest returned),
// exactly, nothing else lost, no orphan table left.
func TestCrashDuringIngest(t *testing.T) {
	step := 1
	if testing.Short() || invariants.RaceEnabled {
		step = 3
	}
	for _, excise := range []bool{false, true} {
		t.Run(fmt.Sprintf("excise=%v", excise), func(t *testing.T) {
			var ins, outs int
			for k := 0; ; k += step {
				pl := newPowerLoss(k, false)
				mem, fs, armed, crashed := pl.Mem, pl.FS, &pl.Armed, &pl.Crashed
				db, err := vigil.Open("db", &vigil.Options{FS: fs, DisableAutomaticCompactions: true, BlockSize: 512, WriteBufferSize: 256 << 10, BlockCacheSize: 1 << 20})
				if err != nil {
					t.Fatal(err)
				}
				before, after := ingestSetup(t, fs, db, excise)
				armed.Store(true)
				ierr := runIngest(db, excise)
				crashedInIngest := crashed.Load()
				db.Close() // still armed: a crash in Close must keep a finished ingestion
				armed.Store(false)
				if !crashed.Load() {
					if ierr != nil {
						t.Fatal(ierr)
					}
					if !checkIngestOutcome(t, mem, before, after, "no crash") {
						t.Fatal("an ingestion that returned nil is not there")
					}
					t.Logf("an ingestion and a Close take %d write ops; crashed at each (step %d): %d recovered with the files, %d without", k, step, ins, outs)
					return
				}
				mem.ResetToSyncedState()
				mem.SetIgnoreSyncs(false)
				in := checkIngestOutcome(t, mem, before, after, fmt.Sprintf("crash at write %d (Ingest: %v)", k+1, ierr))
				if !crashedInIngest && !in {
					t.Fatalf("crash at write %d, in Close after the ingestion returned %v: the files are gone", k+1, ierr)
				}
				if in {
					ins++
				} else {
					outs++
				}
			}
		})
	}
}

// TestIngestIOErrors injects an I/O error at every file-system operation
// of an ingestion: it fails or succeeds, never half, and the reopened DB
// holds all of the files or none.
func TestIngestIOErrors(t *testing.T) {
	step := int32(1)
	if testing.Short() || invariants.RaceEnabled {
		step = 3
	}
	for i := int32(0); ; i += step {
		mem := vfs.NewMem()
		var armed atomic.Bool
		onIndex := errorfs.OnIndex(i)
		inj := errorfs.InjectorFunc(func(op errorfs.Op, path string) error {
			if !armed.Load() {
				return nil
			}
			return onIndex.MaybeError(op, path)
		})
		fs := vfsutil.SyncDataAsSync(errorfs.Wrap(mem, inj))
		db, err := vigil.Open("db", &vigil.Options{FS: fs, DisableAutomaticCompactions: true, BlockSize: 512, WriteBufferSize: 256 << 10, BlockCacheSize: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		before, after := ingestSetup(t, fs, db, i%2 == 1)
		armed.Store(true)
		ierr := runIngest(db, i%2 == 1)
		armed.Store(false)
		fired := onIndex.Index() < 0
		if ierr == nil {
			// It says it is in: then it is, now and after a reopen.
			got, err := dump(db)
			if err != nil || !equalMaps(got, after) {
				t.Fatalf("index %d: Ingest returned nil but the DB does not hold the files (%v)", i, err)
			}
		}
		db.Close()
		in := checkIngestOutcome(t, mem, before, after, fmt.Sprintf("error at op %d (Ingest: %v)", i, ierr))
		if ierr == nil && !in {
			t.Fatalf("index %d: an ingestion that returned nil is gone after a reopen", i)
		}
		if !fired {
			t.Logf("an ingestion runs %d FS operations; injected an error at each (step %d)", i, step)
			return
		}
	}
}
