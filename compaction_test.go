package vigil

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/vigildb/vigil/internal/manifest"
)

// tableEntries sums the point entries and range tombstones of live tables.
func tableEntries(db *DB) (points, tombs uint64) {
	db.mu.Lock()
	defer db.mu.Unlock()
	for _, files := range db.vs.current.Levels {
		for _, f := range files {
			points += f.NumEntries
			tombs += f.NumRangeDels
		}
	}
	return
}

// TestCompactionDropsWhatNoSnapshotSees overwrites and deletes keys, then
// compacts: with no snapshot only the newest version of each live key may
// remain, and deletions and range tombstones vanish at the bottom. A
// snapshot keeps exactly the versions it needs.
func TestCompactionDropsWhatNoSnapshotSees(t *testing.T) {
	db := openMem(t, vfs.NewMem(), &Options{DisableAutomaticCompactions: true})
	defer db.Close()
	for round := 0; round < 5; round++ {
		for i := 0; i < 100; i++ {
			db.Put([]byte(fmt.Sprintf("k%03d", i)), []byte(fmt.Sprintf("v%d", round)), nil)
		}
		db.Flush()
	}
	snap := db.NewSnapshot()
	for i := 0; i < 100; i++ {
		db.Put([]byte(fmt.Sprintf("k%03d", i)), []byte("after-snapshot"), nil)
	}
	for i := 0; i < 10; i++ {
		db.Delete([]byte(fmt.Sprintf("k%03d", i)), nil)
	}
	db.DeleteRange([]byte("k050"), []byte("k060"), nil)
	if err := db.Compact(nil, nil); err != nil {
		t.Fatal(err)
	}
	// With the snapshot: each key keeps its round-4 version (the snapshot
	// sees it) and its newest version: 80 keys × 2; the 10 deleted keys keep
	// their deletion, which hides the older put of the same stripe (10 × 2);
	// the 10 keys under the range tombstone lose their newer put to it
	// (10 × 1); and the tombstone stays for the snapshot-less readers.
	points, tombs := tableEntries(db)
	if points != 190 || tombs != 1 {
		t.Fatalf("with a snapshot: %d points, %d tombstones; want 190, 1", points, tombs)
	}
	mustGet(t, snap, "k005", "v4")
	mustGet(t, snap, "k055", "v4")
	mustNotFound(t, db, "k005")
	mustNotFound(t, db, "k055")
	mustGet(t, db, "k099", "after-snapshot")
	snap.Close()
	if err := db.Compact(nil, nil); err != nil {
		t.Fatal(err)
	}
	points, tombs = tableEntries(db)
	if points != 80 || tombs != 0 {
		t.Fatalf("without snapshots: %d points, %d tombstones; want 80 live keys, 0", points, tombs)
	}
	m := db.Metrics()
	if m.Levels[0].NumFiles != 0 || m.Compact.Count == 0 {
		t.Fatalf("after compaction: L0 %d files, %d compactions", m.Levels[0].NumFiles, m.Compact.Count)
	}
}

// TestTableCacheBoundsOpenFiles keeps many tables and a small table cache:
// reads work and the number of open tables stays at the bound.
func TestTableCacheBoundsOpenFiles(t *testing.T) {
	db := openMem(t, vfs.NewMem(), &Options{MaxOpenFiles: 16, DisableAutomaticCompactions: true, L0StopWritesTrigger: 1000})
	defer db.Close()
	for f := 0; f < 40; f++ {
		db.Put([]byte(fmt.Sprintf("k%03d", f)), []byte("v"), nil)
		db.Flush()
	}
	for f := 0; f < 40; f++ {
		mustGet(t, db, fmt.Sprintf("k%03d", f), "v")
	}
	it, _ := db.NewIter(nil)
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		n++
	}
	it.Close()
	m := db.Metrics()
	if n != 40 || m.Levels[0].NumFiles != 40 || m.TableCache.Open > 16 || m.TableCache.Misses < 40 {
		t.Fatalf("%d keys, %d L0 files, %d open tables (bound 16), %d misses", n, m.Levels[0].NumFiles, m.TableCache.Open, m.TableCache.Misses)
	}
}

// TestWriteStallsAreReported slows flushes down so writers must wait for an
// immutable memtable: they stall (not fail), and the stall and its reason
// show in Metrics and the LOG.
func TestWriteStallsAreReported(t *testing.T) {
	fs := vfs.NewMem()
	db := openMem(t, fs, &Options{WriteBufferSize: minWriteBufferSize, MaxImmutableMemtables: 1})
	db.testingHooks = &testingHooks{beforeFlush: func(flushable) { time.Sleep(20 * time.Millisecond) }}
	val := make([]byte, 1000)
	for i := 0; i < 1000; i++ {
		if err := db.Put([]byte(fmt.Sprintf("k%05d", i)), val, nil); err != nil {
			t.Fatal(err)
		}
	}
	m := db.Metrics()
	if m.Stall.Count == 0 || m.Stall.Duration == 0 || !strings.Contains(m.Stall.LastReason, "immutable memtables") {
		t.Fatalf("stalls: %d, %v, %q", m.Stall.Count, m.Stall.Duration, m.Stall.LastReason)
	}
	if !strings.Contains(m.String(), "write stalls") {
		t.Fatalf("Metrics.String lacks stalls:\n%s", m)
	}
	db.Close()
	f, _ := fs.Open("db/LOG")
	buf := make([]byte, 1<<20)
	n, _ := f.Read(buf)
	f.Close()
	if !strings.Contains(string(buf[:n]), "write stall: too many immutable memtables") {
		t.Fatalf("LOG does not report the stall")
	}
}

// sstOps records, in order, the tables an FS creates and removes.
type sstOps struct {
	vfs.FS
	mu  sync.Mutex
	ops []string // "+NNNNNN" created, "-NNNNNN" removed
}

func (f *sstOps) note(op, name string) {
	if base := f.PathBase(name); strings.HasSuffix(base, ".sst") {
		f.mu.Lock()
		f.ops = append(f.ops, op+strings.TrimSuffix(base, ".sst"))
		f.mu.Unlock()
	}
}

func (f *sstOps) Create(name string) (vfs.File, error) {
	f.note("+", name)
	return f.FS.Create(name)
}

func (f *sstOps) Remove(name string) error {
	f.note("-", name)
	return f.FS.Remove(name)
}

// TestCompactionDeletesInputsBeforeTheNext: in a run of compactions, each
// one's inputs are deleted (and closed) before the next one writes. Kept
// to the end of the run, as they once were, the inputs of the cascade of
// L1 -> L2 compactions after a large fill held 22 MiB of index and filter
// blocks open (and their files on disk).
func TestCompactionDeletesInputsBeforeTheNext(t *testing.T) {
	fs := &sstOps{FS: vfs.NewMem()}
	var mu sync.Mutex
	var infos []CompactionInfo
	db := openMem(t, fs, &Options{
		L0CompactionTrigger: 2, LBaseMaxBytes: 64 << 10, TargetFileSize: 16 << 10,
		EventListener: &EventListener{CompactionEnd: func(ci CompactionInfo) {
			mu.Lock()
			infos = append(infos, ci)
			mu.Unlock()
		}},
	})
	// settle waits for the run of compactions to end: nothing left to
	// pick, none running.
	settle := func() {
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			db.compactionMu.Lock()
			db.mu.Lock()
			c := db.picker.pick(db.vs.current)
			db.mu.Unlock()
			db.compactionMu.Unlock()
			if c == nil {
				return
			}
			if time.Now().After(deadline) {
				t.Fatal("compactions did not settle")
			}
		}
	}
	// Rounds of overwrites, each settled before the next so that no
	// flush runs beside a compaction: L2 fills by trivial moves first,
	// then L1's files overlap it and each run rewrites.
	rng := rand.New(rand.NewPCG(1, 2))
	val := make([]byte, 100) // incompressible, so the levels fill
	for round := 0; round < 6; round++ {
		for i := 0; i < 4000; i++ {
			for j := range val {
				val[j] = byte(rng.Uint32())
			}
			db.Put([]byte(fmt.Sprintf("k%06d", (i*7919+round)%4000)), val, nil)
		}
		if err := db.Flush(); err != nil {
			t.Fatal(err)
		}
		settle()
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	fs.mu.Lock()
	at := make(map[string]int) // op -> its index
	for i, op := range fs.ops {
		at[op] = i
	}
	fs.mu.Unlock()
	mu.Lock()
	defer mu.Unlock()
	var rewrites []CompactionInfo
	for _, ci := range infos {
		if !ci.TrivialMove && ci.Err == nil && len(ci.Outputs) > 0 {
			rewrites = append(rewrites, ci)
		}
	}
	if len(rewrites) < 3 {
		t.Fatalf("%d compactions rewrote tables, want a run of 3 or more", len(rewrites))
	}
	name := func(op string, n uint64) string { return fmt.Sprintf("%s%06d", op, n) }
	for k := 1; k < len(rewrites); k++ {
		next, ok := at[name("+", rewrites[k].Outputs[0])]
		if !ok {
			t.Fatalf("compaction %d's output %d was never created", k, rewrites[k].Outputs[0])
		}
		for _, in := range rewrites[k-1].Inputs {
			if del, ok := at[name("-", in)]; !ok || del > next {
				t.Fatalf("compaction %d's input %06d deleted at op %d (%v), after compaction %d wrote its first output at op %d",
					k-1, in, del, ok, k, next)
			}
		}
	}
}

// TestObsoleteTablesDeletedWhileCompactionsRun: tables that go obsolete
// while the compaction loop is busy (here: held off by compactionMu, as a
// running compaction would hold it) are deleted then, not after it. A
// reader's iterator pins a manual compaction's inputs; once it closes,
// they must go with the loop still held.
func TestObsoleteTablesDeletedWhileCompactionsRun(t *testing.T) {
	fs := vfs.NewMem()
	db := openMem(t, fs, &Options{DisableAutomaticCompactions: true})
	defer db.Close()
	for r := range 3 {
		for i := range 100 {
			db.Put(fmt.Appendf(nil, "k%04d", i), fmt.Appendf(nil, "v%d", r), nil)
		}
		if err := db.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	tables := func() map[string]bool {
		names, _ := fs.List("db")
		m := map[string]bool{}
		for _, n := range names {
			if strings.HasSuffix(n, ".sst") {
				m[n] = true
			}
		}
		return m
	}
	inputs := tables()
	if len(inputs) != 3 {
		t.Fatalf("%d tables after 3 flushes", len(inputs))
	}
	it, err := db.NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Compact(nil, nil); err != nil {
		t.Fatal(err)
	}
	// The compaction loop, woken, blocks on compactionMu: as busy as a
	// compaction would keep it.
	db.compactionMu.Lock()
	defer db.compactionMu.Unlock()
	select {
	case db.compactKick <- struct{}{}:
	default:
	}
	time.Sleep(20 * time.Millisecond)
	for n := range inputs {
		if !tables()[n] {
			t.Fatalf("%s deleted while an iterator pins it", n)
		}
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		left := 0
		now := tables()
		for n := range inputs {
			if now[n] {
				left++
			}
		}
		if left == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d obsolete tables still there while the compaction loop is busy", left, len(inputs))
		}
	}
}

// TestCompactSettlesBottomLevel: a manual compaction of a store whose data
// is all in L0 writes L1 several times over its target; Compact then moves
// that level down whole to the level its size belongs in (settle), so the
// store is one sorted level that no automatic compaction splits again,
// and every key reads back.
func TestCompactSettlesBottomLevel(t *testing.T) {
	db := openMem(t, vfs.NewMem(), &Options{LBaseMaxBytes: 64 << 10, TargetFileSize: 32 << 10, Compression: NoCompression})
	defer db.Close()
	const n = 3000
	for i := 0; i < n; i++ {
		if err := db.Put([]byte(fmt.Sprintf("k%05d", i)), []byte(strings.Repeat("v", 100)), nil); err != nil {
			t.Fatal(err)
		}
		if i%1000 == 999 {
			if err := db.Flush(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := db.Compact(nil, nil); err != nil {
		t.Fatal(err)
	}
	db.mu.Lock()
	v := db.vs.current
	var levels []int
	for l, files := range v.Levels {
		if len(files) > 0 {
			levels = append(levels, l)
		}
	}
	next := db.picker.pick(v)
	db.mu.Unlock()
	if len(levels) != 1 || levels[0] < 2 {
		t.Fatalf("data in levels %v after Compact; want one level below L1", levels)
	}
	if next != nil {
		t.Fatalf("after Compact the picker still picks %s", next)
	}
	for i := 0; i < n; i += 97 {
		mustGet(t, db, fmt.Sprintf("k%05d", i), strings.Repeat("v", 100))
	}
}

// TestMovesKeepLevelCompression: a trivial move does not recompress, so
// where Options.Levels gives the input and output levels different
// compression the tables are rewritten instead (DB.movable): after
// Compact's settle across such a change, and after the picker's moves of
// a sequential load's disjoint L0 tables, every table has its level's
// compression.
func TestMovesKeepLevelCompression(t *testing.T) {
	put := func(db *DB, n int) {
		for i := 0; i < n; i++ {
			if err := db.Put([]byte(fmt.Sprintf("k%05d", i)), []byte(strings.Repeat("v", 100)), nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	// tablesOK reports whether every table has its level's compression,
	// and which levels hold data.
	tablesOK := func(db *DB) (ok bool, levels []int) {
		db.mu.Lock()
		v := db.vs.current
		v.Ref()
		db.mu.Unlock()
		defer v.Unref()
		ok = true
		for level, files := range v.Levels {
			if len(files) > 0 {
				levels = append(levels, level)
			}
			for _, f := range files {
				h, err := db.tableCache.get(f)
				if err != nil {
					t.Fatal(err)
				}
				if c, _ := db.opts.levelCompression(level); h.reader.Properties().Compression != c {
					t.Logf("L%d table %d: %v, the level's compression is %v", level, f.FileNum, h.reader.Properties().Compression, c)
					ok = false
				}
				h.release()
			}
		}
		return ok, levels
	}

	db := openMem(t, vfs.NewMem(), &Options{LBaseMaxBytes: 64 << 10, TargetFileSize: 32 << 10, DisableAutomaticCompactions: true,
		Levels: []LevelOptions{{Compression: NoCompression}, {Compression: NoCompression}, {Compression: ZstdCompression}}})
	defer db.Close()
	put(db, 3000)
	if err := db.Compact(nil, nil); err != nil {
		t.Fatal(err)
	}
	if ok, levels := tablesOK(db); !ok || len(levels) != 1 || levels[0] < 2 {
		t.Fatalf("after Compact: compression as configured %v, data in levels %v; want true, one level below L1", ok, levels)
	}

	// Sequential keys flushed one memtable at a time: disjoint L0 tables
	// that the picker would move to L1 as they are.
	db2 := openMem(t, vfs.NewMem(), &Options{WriteBufferSize: minWriteBufferSize, L0CompactionTrigger: 2,
		Levels: []LevelOptions{{Compression: NoCompression}, {Compression: ZstdCompression}}})
	defer db2.Close()
	put(db2, 3000)
	if err := db2.Flush(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "L0 tables compacted into L1 in L1's compression", func() bool {
		ok, levels := tablesOK(db2)
		return ok && len(levels) > 0 && levels[len(levels)-1] > 0
	})
}

// TestCompactStopsOnBackgroundError: a manual compaction takes no step
// once a background error has stopped writes, and says why: Compact
// refuses to start, and a step's pick (pickManual, which also sees an
// error a background flush or compaction set during the step before)
// refuses too.
func TestCompactStopsOnBackgroundError(t *testing.T) {
	db := openMem(t, vfs.NewMem(), &Options{DisableAutomaticCompactions: true})
	defer db.Close()
	for i := 0; i < 100; i++ {
		if err := db.Put([]byte(fmt.Sprintf("k%03d", i)), []byte("v"), nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	cause := errors.New("injected background error")
	db.mu.Lock()
	db.setBackgroundErrorLocked(cause, "test")
	db.mu.Unlock()
	if err := db.Compact(nil, nil); !errors.Is(err, ErrReadOnly) || !errors.Is(err, cause) {
		t.Fatalf("Compact after a background error: %v; want ErrReadOnly wrapping it", err)
	}
	if m := db.Metrics(); m.Levels[0].NumFiles != 1 {
		t.Fatalf("L0 holds %d tables after the refused Compact; want the 1 flushed", m.Levels[0].NumFiles)
	}
	picked := false
	c, err := db.pickManual(func(*manifest.Version) *compaction { picked = true; return nil })
	if c != nil || picked || !errors.Is(err, ErrReadOnly) || !errors.Is(err, cause) {
		t.Fatalf("pickManual after a background error: %v, %v (picked %v); want ErrReadOnly wrapping it", c, err, picked)
	}
}
