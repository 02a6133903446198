package stress

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/vigildb/vigil"
)

// The --corrupt-files runs: a healthy DB must pass, every flip must get
// exactly one outcome, and the table must be printed.

func checkFileFlips(t *testing.T, res *Result, out string) {
	t.Helper()
	for _, row := range []struct {
		name string
		c    FileFlipCounts
	}{{"WAL", res.FileFlips.WAL}, {"MANIFEST", res.FileFlips.Manifest}, {"CURRENT", res.FileFlips.Current}} {
		c := row.c
		if sum := c.Detected + c.NoEffect + c.Tail + c.SkipAny + c.Missed + c.OpenErrors; sum != c.Injected {
			t.Fatalf("%s flips: outcomes add up to %d, injected %d: %+v\n%s", row.name, sum, c.Injected, c, out)
		}
		if c.Missed != 0 || c.OpenErrors != 0 {
			t.Fatalf("%s flips missed or open errors on a healthy DB: %+v\n%s", row.name, c, out)
		}
	}
	tot := res.FileFlips.Total()
	if tot.Injected == 0 || tot.Detected == 0 {
		t.Fatalf("file flips injected %d, detected %d:\n%s", tot.Injected, tot.Detected, out)
	}
	for _, s := range []string{"bit flips in files", "WAL", "MANIFEST", "CURRENT", "--corrupt-files"} {
		if !strings.Contains(out, s) {
			t.Fatalf("output lacks %q:\n%s", s, out)
		}
	}
}

func TestHealthyCorruptFiles(t *testing.T) {
	for _, tc := range []struct {
		crash CrashMode
		mode  vigil.WALRecoveryMode
	}{
		{CrashNone, vigil.WALRecoverPointInTime},
		{CrashInProcess, vigil.WALRecoverPointInTime},
		{CrashInProcess, vigil.WALAbsoluteConsistency},
		{CrashInProcess, vigil.WALSkipAnyCorrupted},
	} {
		t.Run(string(tc.crash)+"/"+tc.mode.String(), func(t *testing.T) {
			cfg := Config{Seed: 31, Threads: 2, Ops: 6000, Crash: tc.crash, CorruptFiles: true, planHook: func(p *plan) {
				p.Keys = 256
				p.Value = 100
				p.SyncPct = 50
				p.DisableWAL = false
				p.WriteBuffer = 1 << 20
				p.FileFlipPct = 100
				p.ReopenEvery = 300
				p.CrashEvery = 300
				p.WALMode = tc.mode
			}}
			res, out := runFor(t, cfg, 0)
			mustPass(t, res, out)
			checkFileFlips(t, res, out)
			t.Logf("%+v", res.FileFlips)
		})
	}
}

func TestHealthyCorruptFilesKill(t *testing.T) {
	cfg := Config{Seed: 32, Threads: 2, Crash: CrashKill, CorruptFiles: true, planHook: func(p *plan) {
		p.Keys = 256
		p.FileFlipPct = 100
		p.DisableWAL = false
	}}
	res, out := runFor(t, cfg, 4*time.Second)
	mustPass(t, res, out)
	if res.Kills == 0 || res.FileFlips.Total().Injected == 0 {
		t.Fatalf("kills %d, file flips %d:\n%s", res.Kills, res.FileFlips.Total().Injected, out)
	}
	checkFileFlipsSum(t, res, out)
}

func checkFileFlipsSum(t *testing.T, res *Result, out string) {
	t.Helper()
	c := res.FileFlips.Total()
	if sum := c.Detected + c.NoEffect + c.Tail + c.SkipAny + c.Missed + c.OpenErrors; sum != c.Injected || c.Missed != 0 {
		t.Fatalf("file flip outcomes %+v:\n%s", c, out)
	}
}

// TestDetectsMissedFileFlip: without checksums a flipped WAL payload goes
// unnoticed by design, so values come back wrong: the runner must report
// the miss as a divergence naming the flip (the plan forbids checksum none
// with --corrupt-files; the hook overrides it).
func TestDetectsMissedFileFlip(t *testing.T) {
	cfg := Config{Seed: 33, Threads: 1, Ops: 20000, CorruptFiles: true, planHook: func(p *plan) {
		p.Checksum = vigil.ChecksumNone
		p.Protection = 0
		p.Keys = 64
		p.Value = 2000
		p.DisableWAL = false
		p.WriteBuffer = 64 << 20
		p.FileFlipPct = 100
		p.ReopenEvery = 500
		p.WALMode = vigil.WALRecoverPointInTime
	}}
	res, out := runFor(t, cfg, 0)
	if res.Failure == nil {
		t.Fatalf("flips in unchecksummed WALs went unreported:\n%s", out)
	}
	tot := res.FileFlips.Total()
	if tot.Missed+tot.OpenErrors == 0 || !strings.Contains(res.Failure.Detail, "flipped bit") {
		t.Fatalf("failure not filed as a missed file flip (%+v): %v\n%s", tot, res.Failure, out)
	}
	for _, s := range []string{"DIVERGENCE", "seed:", "replay:", "--corrupt-files", "FAIL"} {
		if !strings.Contains(out, s) {
			t.Fatalf("report lacks %q:\n%s", s, out)
		}
	}
	t.Logf("%v", res.Failure)
}

// A small DB for the classification tests: synced puts of keys 1..n (each
// version 1), logged as the runner logs them.
type flipFixture struct {
	kc   keyCodec
	vc   valueCodec
	mem  *vfs.MemFS
	opts *vigil.Options
	ops  []*opRec
	base []kstate
}

func newFlipFixture(t *testing.T, n int, clean bool) *flipFixture {
	t.Helper()
	f := &flipFixture{kc: keyCodec{n: 16}, vc: valueCodec{maxFiller: 40}, mem: vfs.NewStrictMem()}
	f.opts = &vigil.Options{FS: f.mem, ChecksumType: vigil.ChecksumXXH3, WALRecoveryMode: vigil.WALRecoverPointInTime}
	db, err := vigil.Open("db", f.opts)
	if err != nil {
		t.Fatal(err)
	}
	tick := uint64(0)
	for k := 1; k <= n; k++ {
		st := kstate{ver: 1}
		if err := db.Put(f.kc.key(k), f.vc.appendValue(nil, k, 1, false), vigil.Sync); err != nil {
			t.Fatal(err)
		}
		f.ops = append(f.ops, &opRec{id: uint64(k), name: namePut, synced: true, status: opOK, inv: tick + 1, ack: tick + 2,
			writes: []keyWrite{{key: uint32(k), st: st}}})
		tick += 2
	}
	if !clean {
		f.mem.SetIgnoreSyncs(true)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if !clean {
		f.mem.ResetToSyncedState()
		f.mem.SetIgnoreSyncs(false)
	}
	f.base = make([]kstate, f.kc.n)
	for i := range f.base {
		f.base[i] = neverWritten
	}
	return f
}

// newestWAL returns the path and size of the newest WAL, as the runner
// finds it.
func (f *flipFixture) newestWAL(t *testing.T) (string, int64) {
	t.Helper()
	names, err := f.mem.List("db")
	if err != nil {
		t.Fatal(err)
	}
	var wals []walFile
	for _, n := range names {
		if k, x, ok := classifyFile(n); ok && k == fileWAL {
			wals = append(wals, walFile{"db/" + n, x})
		}
	}
	path, err := newestWAL(f.mem, wals)
	if err != nil || path == "" {
		t.Fatalf("no WAL with a record among %v: %v", names, err)
	}
	// The end of what was written: past it the WAL holds only its zero
	// reserve.
	data, err := readFile(f.mem, path)
	if err != nil {
		t.Fatal(err)
	}
	return path, int64(dataEnd(data))
}

// flipAt flips bit 0 of byte off of path, with the tail found as the
// runner finds it.
func (f *flipFixture) flipAt(t *testing.T, kind fileKind, path string, off int64, clean bool) *fileFlip {
	t.Helper()
	st, err := f.mem.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	ff := &fileFlip{fs: f.mem, kind: kind, path: path, size: st.Size(), off: off, clean: clean, newest: kind == fileWAL}
	if kind == fileWAL && !clean {
		if err := ff.findTail(f.kc, f.vc); err != nil {
			t.Fatal(err)
		}
	}
	if err := ff.toggle(); err != nil {
		t.Fatal(err)
	}
	return ff
}

// recovered opens the DB on the flipped files and judges it as the runner
// does; it returns the outcome.
func (f *flipFixture) recovered(t *testing.T, ff *fileFlip, d durability) fileOutcome {
	t.Helper()
	refusals := 0
	db, res, err := openDB("db", f.opts, !ff.clean, ff, func(error) { refusals++ })
	if err != nil {
		t.Fatalf("open: %v (%v)", err, ff)
	}
	defer db.Close()
	var alts []durability
	var outs []fileOutcome
	if res.how == openFlipped {
		alts, outs = ff.alternatives(d, res.mode, db.Metrics())
	}
	rec, div := readAll(dbStore{db}, f.kc, f.vc, nil, "test")
	if div != nil {
		return outcomeOf(res, outs, 0, div)
	}
	_, which, err := solveWith(f.kc, f.base, rec, f.ops, d, alts)
	if err != nil {
		return outcomeOf(res, outs, 0, &Divergence{Op: "verification", Detail: err.Error()})
	}
	return outcomeOf(res, outs, which, nil)
}

func TestFileFlipTailAfterCrash(t *testing.T) {
	f := newFlipFixture(t, 3, false)
	path, size := f.newestWAL(t)
	// A payload byte of the last record (the put of key 3): recovery drops
	// the record as a crash-cut tail, losing a synced write; the runner
	// excuses exactly that write.
	ff := f.flipAt(t, fileWAL, path, size-3, false)
	if !ff.tail || ff.tailOps == nil || !strings.Contains(ff.tailDesc, "batch") {
		t.Fatalf("flip not found in the last record: %v", ff)
	}
	if !ff.tailOps(f.ops[2]) || ff.tailOps(f.ops[1]) || ff.tailOps(f.ops[0]) {
		t.Fatalf("the last record must match the put of key 3 alone: %v", ff)
	}
	d := durability{cutoff: ^uint64(0), syncedWAL: true, what: "crash"}
	if got := f.recovered(t, ff, d); got != fileTail {
		t.Fatalf("outcome %v, want %v (%v)", got, fileTail, ff)
	}
}

func TestFileFlipBeforeTailIsDetected(t *testing.T) {
	for _, clean := range []bool{false, true} {
		f := newFlipFixture(t, 3, clean)
		path, _ := f.newestWAL(t)
		// Inside the first batch record, with intact records after it.
		data, err := readFile(f.mem, path)
		if err != nil {
			t.Fatal(err)
		}
		off := int64(strings.Index(string(data), string(f.vc.appendValue(nil, 1, 1, false))))
		if off < 0 {
			t.Fatal("value of key 1 not in the WAL")
		}
		ff := f.flipAt(t, fileWAL, path, off+5, clean)
		if ff.tail {
			t.Fatalf("flip taken for the tail: %v", ff)
		}
		d := durability{cutoff: ^uint64(0), syncedWAL: true, everything: clean, what: "close"}
		if got := f.recovered(t, ff, d); got != fileDetected {
			t.Fatalf("clean=%v: outcome %v, want detected (%v)", clean, got, ff)
		}
		if ff.openErr == nil || !errors.Is(ff.openErr, vigil.ErrCorruption) {
			t.Fatalf("clean=%v: no corruption error recorded: %v", clean, ff)
		}
	}
}

func TestFileFlipCloseRecordHasNoEffect(t *testing.T) {
	// After a clean close the last record is the close record: damage to
	// it loses nothing.
	f := newFlipFixture(t, 3, true)
	path, size := f.newestWAL(t)
	ff := f.flipAt(t, fileWAL, path, size-1, true)
	d := durability{cutoff: ^uint64(0), syncedWAL: true, everything: true, what: "clean close"}
	if got := f.recovered(t, ff, d); got != fileNoEffect && got != fileDetected {
		t.Fatalf("outcome %v, want no effect or detected (%v)", got, ff)
	}
}

func TestFileFlipCurrentIsDetected(t *testing.T) {
	f := newFlipFixture(t, 2, true)
	ff := f.flipAt(t, fileCurrent, "db/CURRENT", 3, true)
	d := durability{cutoff: ^uint64(0), syncedWAL: true, everything: true, what: "clean close"}
	if got := f.recovered(t, ff, d); got != fileDetected {
		t.Fatalf("outcome %v, want detected (%v)", got, ff)
	}
	// The bit is back: the file opens as before.
	data, err := readFile(f.mem, "db/CURRENT")
	if err != nil || !strings.HasPrefix(string(data), "MANIFEST-") {
		t.Fatalf("CURRENT not restored: %q %v", data, err)
	}
}

// TestFileFlipJudge: the outcome rules, and the report of a miss.
func TestFileFlipJudge(t *testing.T) {
	ff := &fileFlip{kind: fileManifest, path: "db/MANIFEST-000005", size: 100, off: 42, bit: 3}
	outs := []fileOutcome{fileTail, fileSkipAny}
	for _, tc := range []struct {
		res   openResult
		which int
		div   bool
		want  fileOutcome
	}{
		{openResult{how: openDetected}, 0, false, fileDetected},
		{openResult{how: openFlipped}, 0, false, fileNoEffect},
		{openResult{how: openFlipped}, 1, false, fileTail},
		{openResult{how: openFlipped}, 2, false, fileSkipAny},
		{openResult{how: openFlipped}, 0, true, fileMissed},
	} {
		var div *Divergence
		if tc.div {
			div = &Divergence{Op: "verification after crash", Detail: "key k lost"}
		}
		if got := outcomeOf(tc.res, outs, tc.which, div); got != tc.want {
			t.Fatalf("%+v: got %v, want %v", tc, got, tc.want)
		}
	}
	f := newFileFlipper(1, 100)
	div := f.judge(ff, openResult{how: openFlipped}, nil, 0, &Divergence{Op: "verification after crash", Detail: "key k lost"})
	if div == nil || !strings.Contains(div.Op, "MANIFEST file missed") || !strings.Contains(div.Detail, "byte 42") || !strings.Contains(div.Detail, "key k lost") {
		t.Fatalf("miss not reported with the flip: %+v", div)
	}
	if s := f.snapshot(); s.Manifest.Missed != 1 || s.Manifest.Injected != 1 {
		t.Fatalf("miss not counted: %+v", s)
	}
	if div := f.judge(ff, openResult{how: openFlipped}, nil, 0, nil); div != nil {
		t.Fatalf("no-effect flip reported: %v", div)
	}
	if s := f.snapshot(); s.Manifest.NoEffect != 1 || s.Manifest.Injected != 2 {
		t.Fatalf("no effect not counted: %+v", s)
	}
	// A flip that lets an Open fail with another error is a divergence.
	div = f.openFailure("reopen after crash", ff, openResult{how: openFlipError}, errors.New("boom"))
	if div == nil || !strings.Contains(div.Detail, "not ErrCorruption") {
		t.Fatalf("open error not reported: %+v", div)
	}
	if s := f.snapshot(); s.Manifest.OpenErrors != 1 {
		t.Fatalf("open error not counted: %+v", s)
	}
}

// TestFileFlipsOffKeepPlan: without --corrupt-files the plan is what it
// was; with it, only the file-flip fields, the reopen rate and a forced
// checksum differ (and the batch protection, which a checksum of none
// turns off).
func TestFileFlipsOffKeepPlan(t *testing.T) {
	for seed := uint64(1); seed < 40; seed++ {
		off := drawPlan(&Config{Seed: seed, Threads: 4, Crash: CrashInProcess})
		on := drawPlan(&Config{Seed: seed, Threads: 4, Crash: CrashInProcess, CorruptFiles: true})
		if off.CorruptFiles || off.FileFlipPct != 0 || !on.CorruptFiles || on.FileFlipPct == 0 {
			t.Fatalf("seed %d: %+v / %+v", seed, off, on)
		}
		if on.Checksum == vigil.ChecksumNone {
			t.Fatalf("seed %d: checksum none with --corrupt-files", seed)
		}
		on.CorruptFiles, on.FileFlipPct, on.ReopenEvery, on.Notes = off.CorruptFiles, off.FileFlipPct, off.ReopenEvery, off.Notes
		// (--corrupt-files also turns ingestions and checkpoints off, and
		// WAL recycling, see drawWALRecycle.)
		on.IngestOneIn, on.CheckpointOneIn, on.WALRecycle = off.IngestOneIn, off.CheckpointOneIn, off.WALRecycle
		if off.Checksum != vigil.ChecksumNone {
			if on.Checksum != off.Checksum {
				t.Fatalf("seed %d: checksum changed", seed)
			}
		} else {
			on.Checksum, on.BatchProtection = off.Checksum, off.BatchProtection
		}
		if a, b := off.describe(&Config{}), on.describe(&Config{}); a != b {
			t.Fatalf("seed %d: plans differ beyond the file-flip fields:\n%s\n%s", seed, a, b)
		}
	}
}

// TestCorruptFilesReproducible: a single-threaded run flips the same bits
// of the same files every time.
func TestCorruptFilesReproducible(t *testing.T) {
	cfg := Config{Seed: 34, Threads: 1, Ops: 3000, Crash: CrashInProcess, CorruptFiles: true, planHook: func(p *plan) {
		p.Keys = 256
		p.FileFlipPct = 100
		p.ReopenEvery = 400
		p.CrashEvery = 400
	}}
	a, outA := runFor(t, cfg, 0)
	b, outB := runFor(t, cfg, 0)
	mustPass(t, a, outA)
	mustPass(t, b, outB)
	if a.FileFlips != b.FileFlips || a.FileFlips.Total().Injected == 0 {
		t.Fatalf("same seed, different flips:\n%s\n%s", outA, outB)
	}
}
