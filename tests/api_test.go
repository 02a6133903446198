package tests

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/vigildb/vigil"
)

// SyncWAL makes unsynced writes durable: after a crash that loses
// everything unsynced, they are all there.
func TestSyncWALMakesWritesDurable(t *testing.T) {
	for _, sync := range []bool{false, true} {
		t.Run(fmt.Sprintf("SyncWAL=%v", sync), func(t *testing.T) {
			mem := vfs.NewStrictMem()
			db, err := vigil.Open("db", &vigil.Options{FS: mem})
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 100; i++ {
				if err := db.Put([]byte(fmt.Sprintf("k%03d", i)), []byte("v"), nil); err != nil {
					t.Fatal(err)
				}
			}
			if sync {
				if err := db.SyncWAL(); err != nil {
					t.Fatal(err)
				}
			}
			mem.SetIgnoreSyncs(true) // the crash: nothing more reaches the disk
			_ = db.Close()
			mem.ResetToSyncedState()
			mem.SetIgnoreSyncs(false)
			db, err = vigil.Open("db", &vigil.Options{FS: mem})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			n := 0
			for i := 0; i < 100; i++ {
				if ok, err := db.Has([]byte(fmt.Sprintf("k%03d", i))); err != nil {
					t.Fatal(err)
				} else if ok {
					n++
				}
			}
			if sync && n != 100 {
				t.Fatalf("%d of 100 writes survived a crash after SyncWAL", n)
			}
			if !sync && n == 100 {
				t.Fatal("every unsynced write survived the crash: the test cannot tell SyncWAL from nothing")
			}
		})
	}
	db, err := vigil.Open("db", &vigil.Options{FS: vfs.NewMem(), DisableWAL: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.SyncWAL(); !errors.Is(err, vigil.ErrInvalidArgument) {
		t.Fatalf("SyncWAL with DisableWAL = %v", err)
	}
}

// recorder is a BatchHandler writing what it sees.
type recorder struct{ b strings.Builder }

func (r *recorder) Put(k, v []byte) error { fmt.Fprintf(&r.b, "put %s=%s\n", k, v); return nil }
func (r *recorder) Delete(k []byte) error { fmt.Fprintf(&r.b, "delete %s\n", k); return nil }
func (r *recorder) DeleteRange(s, e []byte) error {
	fmt.Fprintf(&r.b, "delete-range [%s, %s)\n", s, e)
	return nil
}

// A Batch can be read back record by record, and replayed into a handler.
func TestBatchReaderAndReplay(t *testing.T) {
	db, err := vigil.Open("db", &vigil.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	b := db.NewBatch()
	b.Put([]byte("a"), []byte("1"))
	b.Delete([]byte("b"))
	b.DeleteRange([]byte("c"), []byte("e"))
	b.DeleteRange([]byte("x"), []byte("x")) // empty: not recorded
	b.Put([]byte("f"), []byte("2"))
	var r recorder
	if err := b.Replay(&r); err != nil {
		t.Fatal(err)
	}
	const want = "put a=1\ndelete b\ndelete-range [c, e)\nput f=2\n"
	if r.b.String() != want {
		t.Fatalf("Replay:\n%s\nwant\n%s", r.b.String(), want)
	}
	br := b.Reader()
	var kinds []string
	for {
		kind, _, _, ok := br.Next()
		if !ok {
			break
		}
		kinds = append(kinds, kind.String())
	}
	if got := strings.Join(kinds, " "); got != "put delete delete-range put" || br.Error() != nil {
		t.Fatalf("Reader kinds: %s, %v", got, br.Error())
	}
	// The batch still applies after being read.
	if err := db.Apply(b, nil); err != nil {
		t.Fatal(err)
	}
	if v, err := db.Get([]byte("f")); err != nil || string(v) != "2" {
		t.Fatalf("Get(f) = %q, %v", v, err)
	}
	stop := errors.New("stop")
	if err := b.Replay(stopAfterOne{stop}); !errors.Is(err, stop) {
		t.Fatalf("Replay's handler error = %v", err)
	}
}

type stopAfterOne struct{ err error }

func (s stopAfterOne) Put(k, v []byte) error         { return s.err }
func (s stopAfterOne) Delete(k []byte) error         { return s.err }
func (s stopAfterOne) DeleteRange(a, b []byte) error { return s.err }

// Has answers without copying the value, in memtables and tables, and
// respects deletions and range deletions.
func TestHas(t *testing.T) {
	db, err := vigil.Open("db", &vigil.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	big := make([]byte, 1<<20)
	for _, k := range []string{"a", "b", "c", "d"} {
		if err := db.Put([]byte(k), big, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Delete([]byte("b"), nil); err != nil {
		t.Fatal(err)
	}
	if err := db.DeleteRange([]byte("c"), []byte("d"), nil); err != nil {
		t.Fatal(err)
	}
	check := func(when string) {
		for k, want := range map[string]bool{"a": true, "b": false, "c": false, "d": true, "z": false} {
			if got, err := db.Has([]byte(k)); err != nil || got != want {
				t.Fatalf("%s: Has(%s) = %v, %v; want %v", when, k, got, err, want)
			}
		}
		// AllocsPerRun counts every goroutine's allocations, and the DB's
		// background goroutines (a flush's closing syncs, the LOG writer)
		// may allocate meanwhile: Has allocates only if every one of a few
		// measurements says so.
		key := []byte("a")
		n := 0.0
		for try := 0; try < 5; try++ {
			if n = testing.AllocsPerRun(20, func() { _, _ = db.Has(key) }); n == 0 {
				break
			}
		}
		if n > 0 {
			t.Fatalf("%s: Has of a 1 MiB value allocates %.0f times", when, n)
		}
	}
	check("memtable")
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	check("table")
}

// A DB created in a directory several levels deep (none of them existing)
// is durable as a whole: Open syncs the parent of every directory it
// created, so a synced write survives a crash right after it.
func TestNewNestedDirectoryIsDurable(t *testing.T) {
	mem := vfs.NewStrictMem()
	db, err := vigil.Open("a/b/c/db", &vigil.Options{FS: mem})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Put([]byte("k"), []byte("v"), vigil.Sync); err != nil {
		t.Fatal(err)
	}
	mem.SetIgnoreSyncs(true) // the crash
	_ = db.Close()
	mem.ResetToSyncedState()
	mem.SetIgnoreSyncs(false)
	db, err = vigil.Open("a/b/c/db", &vigil.Options{FS: mem})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if v, err := db.Get([]byte("k")); err != nil || string(v) != "v" {
		t.Fatalf("after a crash, the synced write in a new nested DB: Get = %q, %v", v, err)
	}
}

// The empty key is a key like any other: a forward scan shows only its
// newest version and none once it is deleted, in the memtable and in
// tables, and turning around on it works. A nil copy of it once made
// forward scans return every older version.
func TestEmptyKeyVersions(t *testing.T) {
	for _, flush := range []bool{false, true} {
		t.Run(fmt.Sprintf("flush=%v", flush), func(t *testing.T) {
			db, err := vigil.Open("db", &vigil.Options{FS: vfs.NewMem()})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			scan := func(reverse bool) string {
				t.Helper()
				it, err := db.NewIter(nil)
				if err != nil {
					t.Fatal(err)
				}
				var b strings.Builder
				ok := it.First()
				if reverse {
					ok = it.Last()
				}
				for ; ok; ok = map[bool]func() bool{false: it.Next, true: it.Prev}[reverse]() {
					fmt.Fprintf(&b, "%q=%q ", it.Key(), it.Value())
				}
				if err := it.Close(); err != nil {
					t.Fatal(err)
				}
				return b.String()
			}
			put := func(k, v string) {
				if err := db.Put([]byte(k), []byte(v), nil); err != nil {
					t.Fatal(err)
				}
			}
			put("", "v1")
			put("", "v2")
			put("a", "x")
			if flush {
				if err := db.Flush(); err != nil {
					t.Fatal(err)
				}
			}
			if got, want := scan(false), `""="v2" "a"="x" `; got != want {
				t.Fatalf("forward scan %s, want %s", got, want)
			}
			if got, want := scan(true), `"a"="x" ""="v2" `; got != want {
				t.Fatalf("reverse scan %s, want %s", got, want)
			}
			it, _ := db.NewIter(nil)
			if !it.Last() || !it.Prev() || string(it.Key()) != "" || !it.Next() || string(it.Key()) != "a" || it.Next() {
				t.Fatal("turning around on the empty key")
			}
			it.Close()
			if err := db.Delete([]byte(""), nil); err != nil {
				t.Fatal(err)
			}
			if flush {
				if err := db.Flush(); err != nil {
					t.Fatal(err)
				}
			}
			if got, want := scan(false), `"a"="x" `; got != want {
				t.Fatalf("forward scan after Delete(\"\") %s, want %s", got, want)
			}
		})
	}
}
