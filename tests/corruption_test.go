package tests

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/vigildb/vigil"
	"github.com/vigildb/vigil/sst"
)

// flipInTable flips one bit in the middle of the given block of the table.
func flipInTable(t *testing.T, fs vfs.FS, path string, kind sst.BlockKind, which int) {
	t.Helper()
	f, err := fs.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := f.Stat()
	r, err := sst.Open(f, path, st.Size(), sst.ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var blocks []sst.BlockInfo
	for _, b := range r.Layout() {
		if b.Kind == kind {
			blocks = append(blocks, b)
		}
	}
	r.Close()
	if which >= len(blocks) {
		t.Fatalf("%s has %d %v blocks", path, len(blocks), kind)
	}
	b := blocks[which]
	rw, err := fs.OpenReadWrite(path)
	if err != nil {
		t.Fatal(err)
	}
	off := int64(b.Offset + b.Size/2)
	buf := make([]byte, 1)
	if _, err := rw.ReadAt(buf, off); err != nil {
		t.Fatal(err)
	}
	buf[0] ^= 0x10
	if _, err := rw.WriteAt(buf, off); err != nil {
		t.Fatal(err)
	}
	rw.Sync()
	rw.Close()
}

func tables(t *testing.T, fs vfs.FS) []string {
	names, err := fs.List("db")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, n := range names {
		if strings.HasSuffix(n, ".sst") {
			out = append(out, "db/"+n)
		}
	}
	sort.Strings(out)
	return out
}

// TestCompactionReportsCorruptInputAndLosesNothing corrupts a data block of
// one of two overlapping L0 tables. The compaction that reads it must fail
// with ErrCorruption, leave both inputs in place (nothing deleted, nothing
// half-replaced), turn the DB read-only, and every key outside the damaged
// block must still read back after a reopen.
func TestCompactionReportsCorruptInputAndLosesNothing(t *testing.T) {
	fs := vfs.NewMem()
	opts := &vigil.Options{FS: fs, BlockSize: 256, DisableAutomaticCompactions: true, BlockCacheSize: -1}
	db, err := vigil.Open("db", opts)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for round := 0; round < 2; round++ {
		for i := 0; i < 400; i++ {
			k, v := fmt.Sprintf("k%04d", i*2+round), fmt.Sprintf("v%d-%d", round, i)
			if err := db.Put([]byte(k), []byte(v), nil); err != nil {
				t.Fatal(err)
			}
			want[k] = v
		}
		if err := db.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	before := tables(t, fs)
	if len(before) != 2 {
		t.Fatalf("want 2 tables, have %v", before)
	}
	flipInTable(t, fs, before[0], sst.BlockKindData, 3)

	db, err = vigil.Open("db", opts)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Compact(nil, nil)
	if !errors.Is(err, vigil.ErrCorruption) {
		t.Fatalf("Compact over a corrupt table = %v, want ErrCorruption", err)
	}
	if !strings.Contains(err.Error(), strings.TrimPrefix(before[0], "db/")) && !strings.Contains(err.Error(), "000") {
		t.Errorf("error does not name the file: %v", err)
	}
	if err := db.Put([]byte("x"), []byte("y"), nil); !errors.Is(err, vigil.ErrReadOnly) {
		t.Fatalf("write after a corrupt compaction = %v, want ErrReadOnly", err)
	}
	if m := db.Metrics(); m.Levels[0].NumFiles != 2 || m.BackgroundError == nil {
		t.Fatalf("after the failed compaction: L0 files %d, background error %v", m.Levels[0].NumFiles, m.BackgroundError)
	}
	db.Close()
	if after := tables(t, fs); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("tables changed: %v -> %v", before, after)
	}
	log := readFile(t, fs, "db/LOG")
	if !strings.Contains(log, "corruption") {
		t.Errorf("LOG does not report the corruption:\n%s", log)
	}

	// Reopen: every key reads back or reports corruption; most read back.
	db, err = vigil.Open("db", opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var ok, corrupt int
	for k, v := range want {
		got, err := db.Get([]byte(k))
		switch {
		case err == nil && string(got) == v:
			ok++
		case errors.Is(err, vigil.ErrCorruption):
			corrupt++
		default:
			t.Fatalf("Get(%s) = %q, %v; want %q or a corruption error", k, got, err, v)
		}
	}
	if corrupt == 0 || ok < len(want)-50 {
		t.Fatalf("%d keys read back, %d reported corruption (of %d)", ok, corrupt, len(want))
	}
	if err := db.Verify(); !errors.Is(err, vigil.ErrCorruption) {
		t.Fatalf("Verify = %v, want ErrCorruption", err)
	}
}

func readFile(t *testing.T, fs vfs.FS, name string) string {
	t.Helper()
	f, err := fs.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var sb strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := f.Read(buf)
		sb.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return sb.String()
}
