package stress

import (
	"bytes"
	"errors"
	"fmt"
	"github.com/vigildb/vigil/internal/private"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/cockroachdb/pebble/vfs/errorfs"
	"github.com/vigildb/vigil"
	"github.com/vigildb/vigil/internal/vfsutil"
	"github.com/vigildb/vigil/wal"
)

// DB bugs found by the stress runner, each as a minimal test that failed
// while the bug was there; all are fixed and run as regression tests.

// TestDBBugFlushRacingClose: DB.Flush racing DB.Close panics. flushAndWait
// takes commitMu and mu without checking closed, so when it gets them after
// Close has set d.walW = nil, rotateMemtableLocked calls d.walW.Close() on
// nil. The runner hit it in an in-process crash (--seed=3
// --crash=inprocess, 8 s):
//
//	panic: runtime error: invalid memory address or nil pointer dereference
//	wal.(*Writer).Close(...)        wal/writer.go:393
//	vigil.(*DB).rotateMemtableLocked commit.go:248
//	vigil.(*DB).flushAndWait         flush.go:50
//	vigil.(*DB).Flush                flush.go:33
//	vigil.(*DB).Compact              compaction.go:203
//
// Fixed in 876ae43 (flushAndWait checks closed under commitMu); a
// regression test since. The reproduction is probabilistic — the Flush
// must be preempted between its closed check and commitMu for all of
// Close — so it rarely fired even before the fix; the code path was plain
// from reading flushAndWait.
func TestDBBugFlushRacingClose(t *testing.T) {
	iters := 6
	if testing.Short() {
		iters = 2
	}
	for i := 0; i < iters; i++ {
		db, err := vigil.Open("db", &vigil.Options{FS: vfs.NewMem()})
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		panicked := make(chan any, 8)
		start := make(chan struct{})
		for g := 0; g < 8; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() {
					if p := recover(); p != nil {
						panicked <- p
					}
				}()
				<-start
				for j := 0; ; j++ {
					if db.Put([]byte(fmt.Sprint("k", g, j)), []byte("v"), nil) != nil {
						return
					}
					if err := db.Flush(); errors.Is(err, vigil.ErrClosed) {
						return
					}
				}
			}()
		}
		// Spinners keep the CPUs busy, so that a Flush preempted between
		// its closed check and commitMu stays off the CPU while Close
		// runs to the end.
		stop := make(chan struct{})
		var spin sync.WaitGroup
		for s := 0; s < 2*runtime.GOMAXPROCS(0); s++ {
			spin.Add(1)
			go func() {
				defer spin.Done()
				for x := 0; ; x++ {
					select {
					case <-stop:
						return
					default:
					}
				}
			}()
		}
		close(start)
		runtime.Gosched()
		db.Close()
		close(stop)
		spin.Wait()
		wg.Wait()
		select {
		case p := <-panicked:
			t.Fatalf("iteration %d: Flush racing Close panicked: %v", i, p)
		default:
		}
	}
}

// TestDBBugCloseDropsUnflushedWrites: with DisableWAL, Close flushes the
// memtable unless a background error stopped the DB — then it drops the
// acknowledged writes in the memtable and returned nil, so a clean Close
// silently lost data. Fixed in 876ae43 (Close now returns an error saying
// the unflushed writes are lost); a regression test since.
func TestDBBugCloseDropsUnflushedWrites(t *testing.T) {
	mem := vfs.NewMem()
	var failTables bool
	var mu sync.Mutex
	fs := vfsutil.SyncDataAsSync(errorfs.Wrap(mem, errorfs.InjectorFunc(func(op errorfs.Op, path string) error {
		mu.Lock()
		defer mu.Unlock()
		if failTables && op == errorfs.OpCreate && strings.HasSuffix(path, ".sst") {
			return errorfs.ErrInjected
		}
		return nil
	})))
	opts := &vigil.Options{FS: fs, DisableWAL: true}
	db, err := vigil.Open("db", opts)
	if err != nil {
		t.Fatal(err)
	}
	// Not synced: with DisableWAL a synced write is ErrInvalidArgument (a
	// sync that syncs nothing would be a lie about durability).
	if err := db.Put([]byte("acked"), []byte("v"), vigil.NoSync); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	failTables = true
	mu.Unlock()
	if err := db.Flush(); err == nil {
		t.Fatal("Flush succeeded despite the injected error")
	}
	cerr := db.Close()
	mu.Lock()
	failTables = false
	mu.Unlock()
	db, err = vigil.Open("db", opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Get([]byte("acked")); errors.Is(err, vigil.ErrNotFound) && cerr == nil {
		t.Fatalf("Close returned nil, but the acknowledged write is gone after reopening")
	}
}

// TestDBBugSeekLTMissesKeyFlip: a bit flip that moves a memtable entry's
// key upward (here "a5" -> "q5", out of order with its successors) is not
// detected by SeekLT, even with paranoid checks and 8 protection bytes:
// the search stops at the flipped node's predecessor (the flipped key
// compares >= the target) without verifying the node that stopped it, so
// it returns "a4" as the last key before "a7" and the newer entries "a5"
// and "a6" are silently skipped. SeekGE and Get verify the node they land
// on and catch it. Fix idea: in a validating search, verify (or
// order-check against its successor) the node that ends the search at
// level 0. `vigil stress --corrupt-memory` found this as missed flips in
// backward scans. Fixed in ec4d8c9 (the validated search order-checks the
// node that ends it against its successor); a regression test since.
func TestDBBugSeekLTMissesKeyFlip(t *testing.T) {
	db, err := vigil.Open("db", &vigil.Options{FS: vfs.NewMem(), ParanoidMemoryChecks: true, MemtableProtectionBytesPerKey: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for i := 0; i < 10; i++ {
		if err := db.Put([]byte(fmt.Sprint("a", i)), []byte(fmt.Sprint("v", i)), nil); err != nil {
			t.Fatal(err)
		}
	}
	if !private.MemtableEntryBytes(db, []byte("a5"), func(k, v []byte) { k[0] ^= 0x10 }) {
		t.Fatal("no memtable entry for a5")
	}
	it, err := db.NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	if it.SeekLT([]byte("a7")) && string(it.Key()) != "a6" {
		t.Fatalf("SeekLT(a7) returned %q without an error: a5 (corrupt) and a6 were skipped silently", it.Key())
	}
	if !it.Valid() && it.Error() == nil {
		t.Fatal("SeekLT(a7) found nothing, without an error")
	}
}

// TestDBBugErrorLosesCause: after a memtable rotation fails to create the
// new WAL (an I/O error), the DB is read-only, but a write that still fits
// the old memtable skips the background-error check (the Reserve fast path
// in makeRoomForWrite) and fails on the closed WAL writer instead: the
// error says "WAL write failed: writer is closed" and does not wrap the
// I/O error that stopped the DB. No data was at risk (the write is
// refused), but the caller could not tell why. Fixed in 876ae43 (Apply
// re-checks the background error under commitMu); a regression test since.
func TestDBBugErrorLosesCause(t *testing.T) {
	// Small writers race with the big writes that fill the memtable: one
	// of them passes the read-only check before the rotation fails, then
	// takes the fast path into the old memtable and its closed WAL. Racy,
	// so tried on several DBs.
	for round := 0; round < 30; round++ {
		if err := errorLosesCauseRound(t, round); err != nil {
			t.Fatal(err)
		}
	}
}

func errorLosesCauseRound(t *testing.T, round int) error {
	mem := vfs.NewMem()
	var logs int
	var mu sync.Mutex
	fs := vfsutil.SyncDataAsSync(errorfs.Wrap(mem, errorfs.InjectorFunc(func(op errorfs.Op, path string) error {
		mu.Lock()
		defer mu.Unlock()
		if op == errorfs.OpCreate && strings.HasSuffix(path, ".log") {
			logs++
			if logs == 2 { // the first is Open's WAL, the second the rotation's
				return errorfs.ErrInjected
			}
		}
		return nil
	})))
	db, err := vigil.Open("db", &vigil.Options{FS: fs, WriteBufferSize: 64 << 10})
	if err != nil {
		return err
	}
	defer db.Close()
	var wg sync.WaitGroup
	errs := make(chan error, 1000)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			big := make([]byte, 4<<10)
			for j := 0; j < 400; j++ {
				v := []byte("v")
				if g == 0 {
					v = big
				}
				if err := db.Put([]byte(fmt.Sprint("k", g, j)), v, nil); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	n := 0
	for err := range errs {
		n++
		if !errors.Is(err, errorfs.ErrInjected) {
			return fmt.Errorf("round %d: a write failed with %v; want an error wrapping the injected fault that stopped the DB (background error: %v)", round, err, db.BackgroundError())
		}
	}
	if n == 0 {
		return fmt.Errorf("round %d: the rotation never failed", round)
	}
	return nil
}

// TestDBBugSeekLTMissesKeyFlipAtTail: the case ec4d8c9 does not cover.
// The search for SeekLT stops before the first node whose key is >= the
// target and (since ec4d8c9) order-checks that node against its successor;
// but when the corrupted node is the last one, there is no successor to
// disagree with, and its protection bytes were never verified: the entry
// silently disappeared from backward scans. Fixed in 0846fe8 (a seek also
// verifies the entry on the other side of where it stops); a regression
// test since.
func TestDBBugSeekLTMissesKeyFlipAtTail(t *testing.T) {
	db, err := vigil.Open("db", &vigil.Options{FS: vfs.NewMem(), ParanoidMemoryChecks: true, MemtableProtectionBytesPerKey: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for i := 0; i < 6; i++ {
		if err := db.Put([]byte(fmt.Sprint("a", i)), []byte(fmt.Sprint("v", i)), nil); err != nil {
			t.Fatal(err)
		}
	}
	// "a5" -> "q5": now the last node holds a key far beyond its place.
	if !private.MemtableEntryBytes(db, []byte("a5"), func(k, v []byte) { k[0] ^= 0x10 }) {
		t.Fatal("no memtable entry for a5")
	}
	it, err := db.NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	if it.SeekLT([]byte("a9")) && string(it.Key()) != "a5" {
		t.Fatalf("SeekLT(a9) returned %q without an error: a5 (corrupt) was skipped silently", it.Key())
	}
	if !it.Valid() && it.Error() == nil {
		t.Fatal("SeekLT(a9) found nothing, without an error")
	}
}

// TestDBBugGetPassesKeyFlippedDown: a bit flip that moves the newest entry
// of a key downward, but not past its predecessor, keeps the list in
// order: Get's search compares the corrupted node (its key is now below
// the target) and moves past it without verifying its protection bytes,
// lands on the key's previous version and returns it as current. The
// runner sees it as a batch's transient value read back, or a stale
// version. Catching it needs the protection bytes of the nodes a search
// passes (RocksDB's memtable_verify_per_key_checksum_on_seek) — at least
// the last one it passes at level 0, the predecessor of where it lands.
// Fixed in 0846fe8 (Get verifies that predecessor); a regression test
// since.
func TestDBBugGetPassesKeyFlippedDown(t *testing.T) {
	db, err := vigil.Open("db", &vigil.Options{FS: vfs.NewMem(), ParanoidMemoryChecks: true, MemtableProtectionBytesPerKey: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, kv := range [][2]string{{"a1", "x"}, {"a5", "old"}, {"a5", "new"}} {
		if err := db.Put([]byte(kv[0]), []byte(kv[1]), nil); err != nil {
			t.Fatal(err)
		}
	}
	// The newest "a5" becomes "a4": between "a1" and the older "a5".
	if !private.MemtableEntryBytes(db, []byte("a5"), func(k, v []byte) { k[1] ^= 0x01 }) {
		t.Fatal("no memtable entry for a5")
	}
	v, err := db.Get([]byte("a5"))
	if err == nil && string(v) != "new" {
		t.Fatalf("Get(a5) = %q without an error: the newest version was corrupted and skipped silently", v)
	}
}

// TestDBBugManifestTornTailDropsFlushWithoutWAL: with DisableWAL, a bit
// flip in the length field of the MANIFEST's last record (the edit of the
// flush a clean Close made) makes the length run past the end of the file,
// which the MANIFEST reader (TolerateCorruptedTailRecords) takes for a torn
// tail: Open drops the edit without an error, deletes the flushed table as
// obsolete, and the writes Close acknowledged are gone. With a WAL the same
// flip is caught (the WAL chain names the missing predecessor); without one
// nothing checks that the dropped edit was never acted upon (its table was
// on disk). `vigil stress --corrupt-files` found it (--seed=732559383
// --crash=inprocess --threads=4, disable_wal=true: MANIFEST-000152, bit 5
// of byte 199 of 274, after a clean close; an acknowledged put of key
// k0000064315 lost). Open.
func TestDBBugManifestTornTailDropsFlushWithoutWAL(t *testing.T) {
	mem := vfs.NewMem()
	opts := &vigil.Options{FS: mem, DisableWAL: true, ChecksumType: vigil.ChecksumCRC64}
	db, err := vigil.Open("db", opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Put([]byte("acked"), []byte("v"), vigil.NoSync); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil { // flushes: the write is acknowledged
		t.Fatal(err)
	}
	names, err := mem.List("db")
	if err != nil {
		t.Fatal(err)
	}
	manifest := ""
	for _, n := range names {
		if strings.HasPrefix(n, "MANIFEST-") {
			manifest = "db/" + n
		}
	}
	data, err := readFile(mem, manifest)
	if err != nil {
		t.Fatal(err)
	}
	r, err := wal.NewReader(bytes.NewReader(data), manifest, wal.TolerateCorruptedTailRecords)
	if err != nil {
		t.Fatal(err)
	}
	last := int64(-1)
	for {
		from := r.Offset()
		if _, err := r.Next(); err != nil {
			break
		}
		last = from
	}
	// Fragment header: checksum (4), length (2, little-endian), type (1):
	// bit 5 of the length's high byte adds 8 KiB.
	ff := &fileFlip{fs: mem, kind: fileManifest, path: manifest, off: last + 5, bit: 5}
	if err := ff.toggle(); err != nil {
		t.Fatal(err)
	}
	db, err = vigil.Open("db", opts)
	if errors.Is(err, vigil.ErrCorruption) {
		return // detected: fixed
	}
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Get([]byte("acked")); err != nil {
		t.Fatalf("Open accepted a MANIFEST whose last edit was damaged, and the write a clean Close acknowledged is gone: %v", err)
	}
}

// TestDBBugCloseAfterBackgroundErrorSkipsCloseRecord: after a background
// error (here a compaction whose output could not be created), Close
// returns nil — a clean close, which acknowledges every write before it —
// but writes no clean-close record to the WAL (db.go skips it when bgErr is
// set). The WAL's last record is then the last acknowledged batch with
// nothing intact after it, so a bit flip in it passes for a crash-cut tail:
// Open drops the write without an error. `vigil stress --corrupt-files
// --faults` found it (--seed=938756465 --crash=inprocess --threads=4
// --faults=0.002: db/000245.log, bit 4 of byte 13856 of 17433, after a
// Close that returned nil; an acknowledged put of key k0000000028 lost).
// Fixed in 3e71dac (Close writes the clean-close record after a
// background error too); a regression test since.
func TestDBBugCloseAfterBackgroundErrorSkipsCloseRecord(t *testing.T) {
	mem := vfs.NewMem()
	var mu sync.Mutex
	phase := 0
	entered, resume := make(chan struct{}), make(chan struct{})
	fs := vfsutil.SyncDataAsSync(errorfs.Wrap(mem, errorfs.InjectorFunc(func(op errorfs.Op, path string) error {
		mu.Lock()
		if phase == 1 && op == errorfs.OpCreate && strings.HasSuffix(path, ".sst") {
			phase = 2
			mu.Unlock()
			close(entered)
			<-resume
			return errorfs.ErrInjected
		}
		mu.Unlock()
		return nil
	})))
	opts := &vigil.Options{FS: fs, ChecksumType: vigil.ChecksumCRC32c, DisableAutomaticCompactions: true}
	db, err := vigil.Open("db", opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"1", "2"} {
		if err := db.Put([]byte("a"), []byte(v), nil); err != nil {
			t.Fatal(err)
		}
		if err := db.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	phase = 1
	mu.Unlock()
	done := make(chan error, 1)
	go func() { done <- db.Compact(nil, nil) }()
	<-entered // the compaction is about to fail; the memtable is empty
	if err := db.Put([]byte("acked"), []byte("v"), nil); err != nil {
		t.Fatal(err)
	}
	close(resume)
	if err := <-done; err == nil {
		t.Fatal("the compaction did not fail")
	}
	if err := db.Close(); err != nil {
		return // Close reports the background error: not a clean close (fixed)
	}
	names, err := mem.List("db")
	if err != nil {
		t.Fatal(err)
	}
	var wals []walFile
	for _, n := range names {
		if k, x, ok := classifyFile(n); ok && k == fileWAL {
			wals = append(wals, walFile{"db/" + n, x})
		}
	}
	newest, err := newestWAL(mem, wals)
	if err != nil || newest == "" {
		t.Fatalf("no WAL with a record among %v: %v", names, err)
	}
	st, err := mem.Stat(newest)
	if err != nil {
		t.Fatal(err)
	}
	// The last byte of the WAL: the acknowledged batch's payload, unless a
	// clean-close record follows it.
	ff := &fileFlip{fs: mem, kind: fileWAL, path: newest, off: st.Size() - 1, bit: 1}
	if err := ff.toggle(); err != nil {
		t.Fatal(err)
	}
	db, err = vigil.Open("db", opts)
	if errors.Is(err, vigil.ErrCorruption) {
		return // detected (fixed)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Get([]byte("acked")); err != nil {
		t.Fatalf("Close returned nil, then a flip in the WAL's last record silently dropped the acknowledged write: %v", err)
	}
}
