package backup

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/vigildb/vigil"
)

// model is what a DB should hold.
type model map[string]string

func (m model) clone() model { return maps.Clone(m) }

// testDBOptions are small, deterministic DB options for tests.
func testDBOptions(fs vfs.FS) *vigil.Options {
	return &vigil.Options{FS: fs, DisableAutomaticCompactions: true, BlockCacheSize: 1 << 20, BlockSize: 1024}
}

func openDB(t testing.TB, fs vfs.FS, dir string, mods ...func(*vigil.Options)) *vigil.DB {
	t.Helper()
	o := testDBOptions(fs)
	for _, m := range mods {
		m(o)
	}
	db, err := vigil.Open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	return db
}

// writer applies random operations to a DB and to its model.
type writer struct {
	t   testing.TB
	db  *vigil.DB
	m   model
	rng *rand.Rand
}

func newWriter(t testing.TB, db *vigil.DB, seed uint64) *writer {
	return &writer{t: t, db: db, m: model{}, rng: rand.New(rand.NewPCG(seed, 17))}
}

func (w *writer) key(n int) string { return fmt.Sprintf("key%05d", w.rng.IntN(n)) }

func (w *writer) value() string {
	b := make([]byte, 20+w.rng.IntN(150))
	for i := range b {
		b[i] = 'a' + byte(w.rng.IntN(8)) // compressible, not constant
	}
	return string(b)
}

// puts writes n random keys out of keySpace, in batches, synced.
func (w *writer) puts(n, keySpace int) {
	w.t.Helper()
	for i := 0; i < n; {
		b := w.db.NewBatch()
		for j := 0; j < 10 && i < n; j, i = j+1, i+1 {
			k, v := w.key(keySpace), w.value()
			b.Put([]byte(k), []byte(v))
			w.m[k] = v
		}
		if err := w.db.Apply(b, vigil.Sync); err != nil {
			w.t.Fatal(err)
		}
	}
}

// deletes deletes n random keys and one range of keys.
func (w *writer) deletes(n, keySpace int) {
	w.t.Helper()
	for i := 0; i < n; i++ {
		k := w.key(keySpace)
		if err := w.db.Delete([]byte(k), vigil.Sync); err != nil {
			w.t.Fatal(err)
		}
		delete(w.m, k)
	}
	lo, hi := w.key(keySpace), w.key(keySpace)
	if lo > hi {
		lo, hi = hi, lo
	}
	if err := w.db.DeleteRange([]byte(lo), []byte(hi), vigil.Sync); err != nil {
		w.t.Fatal(err)
	}
	for k := range w.m {
		if k >= lo && k < hi {
			delete(w.m, k)
		}
	}
}

func (w *writer) flush() {
	w.t.Helper()
	if err := w.db.Flush(); err != nil {
		w.t.Fatal(err)
	}
}

// contents reads every live pair of db.
func contents(t testing.TB, db *vigil.DB) model {
	t.Helper()
	it, err := db.NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	m := model{}
	for ok := it.First(); ok; ok = it.Next() {
		m[string(it.Key())] = string(it.Value())
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	return m
}

// restoredContents opens the DB in dir read-only and reads it.
func restoredContents(t testing.TB, fs vfs.FS, dir string) model {
	t.Helper()
	db, err := vigil.Open(dir, &vigil.Options{FS: fs, ReadOnly: true, BlockCacheSize: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	return contents(t, db)
}

// diffModels describes how got differs from want, key by key ("" if equal).
func diffModels(got, want model) string {
	var b strings.Builder
	n := 0
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if g, ok := got[k]; !ok {
			fmt.Fprintf(&b, "missing %q\n", k)
			n++
		} else if g != want[k] {
			fmt.Fprintf(&b, "%q = %q, want %q\n", k, g, want[k])
			n++
		}
		if n > 10 {
			return b.String() + "...\n"
		}
	}
	for _, k := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[k]; !ok {
			fmt.Fprintf(&b, "extra %q\n", k)
			n++
		}
		if n > 10 {
			return b.String() + "...\n"
		}
	}
	return b.String()
}

func readFile(t testing.TB, fs vfs.FS, name string) []byte {
	t.Helper()
	f, err := fs.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func writeFile(t testing.TB, fs vfs.FS, name string, data []byte) {
	t.Helper()
	f, err := fs.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	// A copy: under the race detector Pebble's MemFS mangles what it was
	// given to write, to catch writers that reuse the buffer.
	if _, err := f.Write(append([]byte(nil), data...)); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func exists(fs vfs.FS, name string) bool {
	_, err := fs.Stat(name)
	return err == nil || !errors.Is(err, os.ErrNotExist)
}

// sharedNames lists shared/ (without temporary files).
func sharedNames(t testing.TB, e *Engine) []string {
	t.Helper()
	names, err := e.fs.List(e.path(sharedDir))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(names)
	return names
}

// referenced returns the shared names the backups list.
func referenced(infos []Info) []string {
	set := map[string]bool{}
	for _, in := range infos {
		for _, f := range in.Files {
			if f.Shared {
				set[f.Name] = true
			}
		}
	}
	return slices.Sorted(maps.Keys(set))
}

func sameBytes(a, b []byte) bool { return bytes.Equal(a, b) }
