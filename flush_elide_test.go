package vigil

import (
	"errors"
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/vfs"
)

// TestFlushElides checks what a flush leaves out: versions shadowed by a
// newer one of their key and points under a range tombstone, but only
// where no snapshot lies between the two; every snapshot and the latest
// state read the same before and after the flush, and after a reopen.
func TestFlushElides(t *testing.T) {
	fs := vfs.NewMem()
	db := openMem(t, fs, &Options{DisableAutomaticCompactions: true})
	put := func(k, v string) {
		t.Helper()
		if err := db.Put([]byte(k), []byte(v), nil); err != nil {
			t.Fatal(err)
		}
	}
	put("a", "1")
	put("a", "2") // shadows a=1: elided
	snap := db.NewSnapshot()
	put("a", "3") // a=2 is the snapshot's: kept
	put("a", "4") // shadows a=3: elided
	for i := range 10 {
		put(fmt.Sprintf("r%d", i), "x") // under the range deletion below: elided
	}
	put("s0", "x")
	snap2 := db.NewSnapshot()
	if err := db.DeleteRange([]byte("r"), []byte("t"), nil); err != nil {
		t.Fatal(err)
	}
	put("s1", "y") // newer than the tombstone: kept
	want := func(label string, get func([]byte) ([]byte, error), kv map[string]string) {
		t.Helper()
		for _, k := range []string{"a", "r0", "r9", "s0", "s1"} {
			v, err := get([]byte(k))
			switch w, ok := kv[k]; {
			case !ok && !errors.Is(err, ErrNotFound):
				t.Errorf("%s: Get(%s) = %q, %v; want not found", label, k, v, err)
			case ok && (err != nil || string(v) != w):
				t.Errorf("%s: Get(%s) = %q, %v; want %q", label, k, v, err, w)
			}
		}
	}
	check := func(when string) {
		want(when+", latest", db.Get, map[string]string{"a": "4", "s1": "y"})
		want(when+", first snapshot", snap.Get, map[string]string{"a": "2"})
		want(when+", second snapshot", snap2.Get, map[string]string{"a": "4", "r0": "x", "r9": "x", "s0": "x"})
	}
	check("before the flush")
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	check("after the flush")
	// a=1, a=3: shadowed within their stripes. The r keys and s0 lie
	// under the tombstone, but snap2 sees them: kept.
	if got := db.Metrics().Flush.Elided; got != 2 {
		t.Errorf("Flush.Elided = %d, want 2", got)
	}
	snap.Close()
	snap2.Close()

	// Without the snapshots, a second memtable's covered points go too.
	for i := range 10 {
		put(fmt.Sprintf("u%d", i), "x")
	}
	put("u0", "y")
	if err := db.DeleteRange([]byte("u1"), []byte("u9"), nil); err != nil {
		t.Fatal(err)
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	// u0=x shadowed; u1..u8 covered.
	if got := db.Metrics().Flush.Elided; got != 2+1+8 {
		t.Errorf("Flush.Elided = %d, want %d", got, 2+1+8)
	}
	for i := range 10 {
		v, err := db.Get(fmt.Appendf(nil, "u%d", i))
		switch {
		case i == 0 && string(v) != "y", i == 9 && string(v) != "x":
			t.Errorf("u%d = %q, %v", i, v, err)
		case i > 0 && i < 9 && !errors.Is(err, ErrNotFound):
			t.Errorf("u%d = %q, %v; want not found", i, v, err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openMem(t, fs, &Options{DisableAutomaticCompactions: true})
	defer db.Close()
	want("after a reopen", db.Get, map[string]string{"a": "4", "s1": "y"})
	if err := db.Verify(); err != nil {
		t.Fatal(err)
	}
}
