package vigil

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/vigildb/vigil/internal/private"
	"github.com/vigildb/vigil/sst"
	"github.com/vigildb/vigil/wal"
)

func openMem(t *testing.T, fs vfs.FS, o *Options) *DB {
	t.Helper()
	if o == nil {
		o = &Options{}
	}
	o.FS = fs
	db, err := Open("db", o)
	if err != nil {
		t.Fatal(err)
	}
	return db
}

// mustNewIter opens an iterator on r (a DB or a Snapshot), failing t on
// an error.
func mustNewIter(t *testing.T, r interface {
	NewIter(*IterOptions) (*Iterator, error)
}, o *IterOptions) *Iterator {
	t.Helper()
	it, err := r.NewIter(o)
	if err != nil {
		t.Fatal(err)
	}
	return it
}

func mustGet(t *testing.T, db interface{ Get([]byte) ([]byte, error) }, k, want string) {
	t.Helper()
	v, err := db.Get([]byte(k))
	if err != nil {
		t.Fatalf("Get(%q): %v", k, err)
	}
	if string(v) != want {
		t.Fatalf("Get(%q) = %q, want %q", k, v, want)
	}
}

func mustNotFound(t *testing.T, db interface{ Get([]byte) ([]byte, error) }, k string) {
	t.Helper()
	if v, err := db.Get([]byte(k)); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get(%q) = %q, %v; want ErrNotFound", k, v, err)
	}
}

func TestBasicPutGetDeleteReopen(t *testing.T) {
	fs := vfs.NewMem()
	db := openMem(t, fs, nil)
	if err := db.Put([]byte("a"), []byte("1"), nil); err != nil {
		t.Fatal(err)
	}
	if err := db.Put([]byte("b"), []byte("2"), Sync); err != nil {
		t.Fatal(err)
	}
	if err := db.Delete([]byte("a"), nil); err != nil {
		t.Fatal(err)
	}
	mustNotFound(t, db, "a")
	mustGet(t, db, "b", "2")
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); !errors.Is(err, ErrClosed) {
		t.Fatalf("second Close = %v, want ErrClosed", err)
	}
	if _, err := db.Get([]byte("b")); !errors.Is(err, ErrClosed) {
		t.Fatalf("Get after Close = %v, want ErrClosed", err)
	}
	if err := db.Put([]byte("c"), nil, nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("Put after Close = %v, want ErrClosed", err)
	}
	// Reopen replays the WAL.
	db = openMem(t, fs, nil)
	mustNotFound(t, db, "a")
	mustGet(t, db, "b", "2")
	// And again after a flush.
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	db.Close()
	db = openMem(t, fs, nil)
	defer db.Close()
	mustNotFound(t, db, "a")
	mustGet(t, db, "b", "2")
	names, _ := fs.List("db")
	joined := strings.Join(names, " ")
	for _, want := range []string{"CURRENT", "LOCK", "MANIFEST-", "OPTIONS-", ".log", ".sst", "LOG"} {
		if !strings.Contains(joined, want) {
			t.Errorf("directory %v has no %s file", names, want)
		}
	}
}

func TestOpenLocksDirectory(t *testing.T) {
	fs := vfs.NewMem()
	db := openMem(t, fs, nil)
	_, err := Open("db", &Options{FS: fs})
	if err == nil || !strings.Contains(err.Error(), "lock") {
		t.Fatalf("second Open = %v, want a lock error", err)
	}
	db.Close()
	db2 := openMem(t, fs, nil)
	db2.Close()

	// On the real file system too, across handles in this process.
	dir := t.TempDir()
	d1, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir, nil); err == nil {
		t.Fatal("second Open of a real directory succeeded")
	}
	d1.Close()
}

func TestOptionsValidateReportsEverything(t *testing.T) {
	o := &Options{
		ChecksumType:                  42,
		MemtableProtectionBytesPerKey: 3,
		LevelMultiplier:               1,
		Compression:                   9,
		ZstdLevel:                     23,
		WALRecoveryMode:               7,
		MemtableFilterRatio:           0.5,
	}
	o.EnsureDefaults()
	err := o.Validate()
	if !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("Validate = %v, want ErrInvalidArgument", err)
	}
	// Each invalid value as the user wrote it, with the valid names in the
	// user's terms (the option constants, not the on-disk codes).
	for _, want := range []string{"ChecksumType = ChecksumType(42): unknown; valid: ChecksumDefault, ChecksumNone", "MemtableProtectionBytesPerKey = 3",
		"LevelMultiplier = 1", "Compression = Compression(9): unknown; valid: DefaultCompression, NoCompression, SnappyCompression or ZstdCompression",
		"WALRecoveryMode = WALRecoveryMode(7): unknown; valid: WALRecoverPointInTime", "ZstdLevel = 23: must be in [0, 22]",
		"MemtableFilterRatio = 0.5: must be at most 0.25"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Validate error does not mention %s: %v", want, err)
		}
	}
	if _, err := Open("x", &Options{FS: vfs.NewMem(), ChecksumType: 42}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("Open with a bad checksum type = %v, want ErrInvalidArgument", err)
	}
	if _, err := Open("x", &Options{FS: vfs.NewMem(), ChecksumType: ChecksumNone, MemtableProtectionBytesPerKey: 8}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("protection bytes without checksums = %v, want ErrInvalidArgument", err)
	}
	// The zero value is valid and means the defaults: never "no checksums".
	var z Options
	z.EnsureDefaults()
	if err := z.Validate(); err != nil {
		t.Fatal(err)
	}
	if z.ChecksumType.Resolve() != ChecksumXXH3 {
		t.Fatalf("default checksum %v, want xxh3", z.ChecksumType)
	}
}

func TestReopenWithEveryChecksumType(t *testing.T) {
	fs := vfs.NewMem()
	types := []ChecksumType{ChecksumNone, ChecksumCRC32c, ChecksumXXHash, ChecksumXXHash64, ChecksumXXH3, ChecksumCRC64}
	for i, ct := range types {
		db := openMem(t, fs, &Options{ChecksumType: ct})
		for j := 0; j < 100; j++ {
			if err := db.Put([]byte(fmt.Sprintf("%d-%03d", i, j)), []byte(ct.String()), nil); err != nil {
				t.Fatal(err)
			}
		}
		if err := db.Flush(); err != nil {
			t.Fatal(err)
		}
		// Leave some data in the WAL too, written with this type.
		db.Put([]byte(fmt.Sprintf("%d-wal", i)), []byte(ct.String()), nil)
		db.Close()
	}
	for _, ct := range types {
		db := openMem(t, fs, &Options{ChecksumType: ct})
		for i, wt := range types {
			for j := 0; j < 100; j += 17 {
				mustGet(t, db, fmt.Sprintf("%d-%03d", i, j), wt.String())
			}
			mustGet(t, db, fmt.Sprintf("%d-wal", i), wt.String())
		}
		if err := db.Verify(); err != nil {
			t.Fatalf("Verify under %v: %v", ct, err)
		}
		db.Close()
	}
}

func TestBatchAtomicAndCount(t *testing.T) {
	db := openMem(t, vfs.NewMem(), nil)
	defer db.Close()
	b := db.NewBatch()
	b.Put([]byte("a"), []byte("1"))
	b.Put([]byte("b"), []byte("2"))
	b.Delete([]byte("c"))
	b.DeleteRange([]byte("x"), []byte("z"))
	if b.Count() != 4 {
		t.Fatalf("Count = %d, want 4", b.Count())
	}
	db.Put([]byte("c"), []byte("3"), nil)
	db.Put([]byte("y"), []byte("4"), nil)
	if err := db.Apply(b, nil); err != nil {
		t.Fatal(err)
	}
	mustGet(t, db, "a", "1")
	mustGet(t, db, "b", "2")
	mustNotFound(t, db, "c")
	mustNotFound(t, db, "y")
	b.Reset()
	if b.Count() != 0 || !b.Empty() {
		t.Fatal("Reset left records")
	}
	if err := db.DeleteRange([]byte("b"), []byte("a"), nil); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("DeleteRange with start > end = %v", err)
	}
}

func TestSnapshotIsolation(t *testing.T) {
	db := openMem(t, vfs.NewMem(), &Options{WriteBufferSize: minWriteBufferSize})
	defer db.Close()
	db.Put([]byte("k"), []byte("old"), nil)
	s := db.NewSnapshot()
	db.Put([]byte("k"), []byte("new"), nil)
	db.Put([]byte("k2"), []byte("x"), nil)
	mustGet(t, s, "k", "old")
	mustNotFound(t, s, "k2")
	// Still true after the data moves to SSTs and gets compacted.
	if err := db.Compact(nil, nil); err != nil {
		t.Fatal(err)
	}
	mustGet(t, s, "k", "old")
	mustGet(t, db, "k", "new")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get([]byte("k")); !errors.Is(err, ErrClosed) {
		t.Fatalf("Get on a closed snapshot = %v", err)
	}
}

func TestLargeValuesAndBatchLargerThanMemtable(t *testing.T) {
	db := openMem(t, vfs.NewMem(), &Options{WriteBufferSize: minWriteBufferSize})
	defer db.Close()
	big := bytes.Repeat([]byte("v"), 3*minWriteBufferSize)
	if err := db.Put([]byte("big"), big, nil); err != nil {
		t.Fatal(err)
	}
	b := db.NewBatch()
	for i := 0; i < 2000; i++ {
		b.Put([]byte(fmt.Sprintf("k%05d", i)), bytes.Repeat([]byte("w"), 100))
	}
	if err := db.Apply(b, nil); err != nil {
		t.Fatal(err)
	}
	v, err := db.Get([]byte("big"))
	if err != nil || !bytes.Equal(v, big) {
		t.Fatalf("big value: %d bytes, %v", len(v), err)
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	v, err = db.Get([]byte("big"))
	if err != nil || !bytes.Equal(v, big) {
		t.Fatalf("big value after flush: %d bytes, %v", len(v), err)
	}
	mustGet(t, db, "k01999", strings.Repeat("w", 100))
}

func TestDisableWALFlushesOnClose(t *testing.T) {
	fs := vfs.NewMem()
	db := openMem(t, fs, &Options{DisableWAL: true})
	db.Put([]byte("a"), []byte("1"), nil)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	names, _ := fs.List("db")
	for _, n := range names {
		if strings.HasSuffix(n, ".log") {
			t.Errorf("WAL %s exists with DisableWAL", n)
		}
	}
	db = openMem(t, fs, &Options{DisableWAL: true})
	defer db.Close()
	mustGet(t, db, "a", "1")
}

func TestReadOnly(t *testing.T) {
	fs := vfs.NewMem()
	if _, err := Open("db", &Options{FS: fs, ReadOnly: true}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("ReadOnly open of a missing DB = %v", err)
	}
	db := openMem(t, fs, nil)
	db.Put([]byte("a"), []byte("1"), nil)
	db.Flush()
	db.Put([]byte("b"), []byte("2"), nil)
	db.Close()
	before, _ := fs.List("db")
	sort.Strings(before)
	db = openMem(t, fs, &Options{ReadOnly: true})
	mustGet(t, db, "a", "1")
	mustGet(t, db, "b", "2")
	if err := db.Put([]byte("c"), nil, nil); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("Put on a read-only DB = %v", err)
	}
	db.Close()
	after, _ := fs.List("db")
	sort.Strings(after)
	if fmt.Sprint(before) != fmt.Sprint(after) {
		t.Fatalf("read-only open changed the directory:\n%v\n%v", before, after)
	}
}

func TestMetricsString(t *testing.T) {
	db := openMem(t, vfs.NewMem(), nil)
	defer db.Close()
	for i := 0; i < 100; i++ {
		db.Put([]byte(fmt.Sprintf("k%d", i)), []byte("v"), nil)
	}
	db.Flush()
	m := db.Metrics()
	if m.Levels[0].NumFiles != 1 || m.Flush.Count != 1 || m.WAL.Records != 100 {
		t.Fatalf("metrics: L0 files %d, flushes %d, WAL records %d", m.Levels[0].NumFiles, m.Flush.Count, m.WAL.Records)
	}
	// The live WAL has its current block at least, and never more than
	// the bound.
	if b := m.Memory.WALBuffers; b < wal.BlockSize || b > 512*wal.BlockSize {
		t.Errorf("Memory.WALBuffers = %d, want the live WAL's blocks", b)
	}
	s := m.String()
	for _, want := range []string{"L0", "L6", "flushes: 1", "block cache", "WAL", "WAL buffers"} {
		if !strings.Contains(s, want) {
			t.Errorf("Metrics.String lacks %q:\n%s", want, s)
		}
	}
}

// TestMetricsWALSyncs: every synced Put of a lone writer costs an fsync of
// the WAL, and the count survives the WAL's rotation and the DB's Close.
func TestMetricsWALSyncs(t *testing.T) {
	fs := vfs.NewMem()
	db := openMem(t, fs, nil)
	before := db.Metrics().WAL.Syncs
	for i := 0; i < 10; i++ {
		if err := db.Put([]byte(fmt.Sprintf("k%d", i)), []byte("v"), Sync); err != nil {
			t.Fatal(err)
		}
	}
	m := db.Metrics()
	if m.WAL.Syncs < before+10 {
		t.Fatalf("10 synced Puts: WAL syncs %d -> %d", before, m.WAL.Syncs)
	}
	if s := m.String(); !strings.Contains(s, fmt.Sprintf("%d syncs", m.WAL.Syncs)) {
		t.Errorf("Metrics.String lacks the WAL syncs:\n%s", s)
	}
	if err := db.Flush(); err != nil { // rotates the WAL
		t.Fatal(err)
	}
	if err := db.Put([]byte("x"), []byte("v"), Sync); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if got := db.Metrics().WAL.Syncs; got < m.WAL.Syncs+1 {
		t.Fatalf("after a rotation, a synced Put and Close: WAL syncs %d, was %d", got, m.WAL.Syncs)
	}
}

// TestOpenLockAcrossProcesses opens a DB here and tries again from a child
// process (this test binary, re-run): the child's Open must fail.
func TestOpenLockAcrossProcesses(t *testing.T) {
	if dir := os.Getenv("VIGIL_LOCK_CHILD_DIR"); dir != "" {
		db, err := Open(dir, nil)
		if err == nil {
			db.Close()
			fmt.Println("CHILD-OPENED")
			os.Exit(0)
		}
		fmt.Println("CHILD-FAILED:", err)
		os.Exit(0)
	}
	dir := t.TempDir()
	db, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	child := func() string {
		cmd := exec.Command(os.Args[0], "-test.run=^TestOpenLockAcrossProcesses$")
		cmd.Env = append(os.Environ(), "VIGIL_LOCK_CHILD_DIR="+dir)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("child: %v\n%s", err, out)
		}
		return string(out)
	}
	if out := child(); !strings.Contains(out, "CHILD-FAILED") || !strings.Contains(out, "lock") {
		t.Fatalf("second process opened a locked DB:\n%s", out)
	}
	db.Close()
	if out := child(); !strings.Contains(out, "CHILD-OPENED") {
		t.Fatalf("second process could not open after Close:\n%s", out)
	}
}

// TestReadersRacingClose runs readers of every kind while Close runs: each
// must see a value, ErrNotFound or ErrClosed, never a panic. A reader that
// passed its closed check just before Close released the read state used to
// dereference nil (found by the stress runner in CI).
func TestReadersRacingClose(t *testing.T) {
	for round := 0; round < 20; round++ {
		db := openMem(t, vfs.NewMem(), nil)
		for i := 0; i < 100; i++ {
			if err := db.Put([]byte(fmt.Sprintf("k%03d", i)), []byte("v"), nil); err != nil {
				t.Fatal(err)
			}
		}
		if err := db.Flush(); err != nil {
			t.Fatal(err)
		}
		ok := func(err error) bool {
			return err == nil || errors.Is(err, ErrNotFound) || errors.Is(err, ErrClosed)
		}
		start := make(chan struct{})
		errc := make(chan error, 4)
		reader := func(op func() error) {
			<-start
			for i := 0; i < 200; i++ {
				if err := op(); !ok(err) {
					errc <- err
					return
				}
			}
			errc <- nil
		}
		go reader(func() error { _, err := db.Get([]byte("k050")); return err })
		go reader(func() error {
			it, err := db.NewIter(nil)
			if err != nil {
				return err
			}
			for it.First(); it.Valid(); it.Next() {
			}
			return it.Close()
		})
		go reader(func() error {
			_, err := db.GetAppend(nil, []byte("k001"))
			return err
		})
		go reader(db.Verify)
		close(start)
		// An iterator may be open at the moment of Close: Close then says
		// so (and the iterator stops with ErrClosed).
		if err := db.Close(); err != nil && !strings.Contains(err.Error(), "leaked iterators") {
			t.Fatal(err)
		}
		for i := 0; i < 4; i++ {
			if err := <-errc; err != nil {
				t.Fatalf("round %d: reader racing Close: %v", round, err)
			}
		}
		// The window is a few instructions wide, so step into it directly:
		// these are the paths a reader takes after its closed check.
		if _, err := db.get(nil, []byte("k050"), db.visibleSeq.Load(), false); !errors.Is(err, ErrClosed) {
			t.Fatalf("get after the closed check = %v, want ErrClosed", err)
		}
		if _, err := db.newIter(nil, db.visibleSeq.Load(), sst.ReadOptions{}); !errors.Is(err, ErrClosed) {
			t.Fatalf("newIter after the closed check = %v, want ErrClosed", err)
		}
		if private.MemtableEntryBytes(db, []byte("k050"), func(_, _ []byte) {}) {
			t.Fatal("MemtableEntryBytes found an entry after Close")
		}
		db.forEachMemtableArena(func([]byte) { t.Fatal("arena after Close") })
	}
}
