package backup

import (
	"errors"
	"testing"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/vigildb/vigil"
)

// A backup whose meta file is of version 1 (its digest in the range
// digest's first format) still restores, checked against that format: the
// right legacy digest passes, the current format's digest or a wrong one
// fails with ErrCorruption. The pair ("", "") is in the data, the case the
// two formats tell apart.
func TestRestoreLegacyDigest(t *testing.T) {
	fs := vfs.NewMem()
	db := openDB(t, fs, "/db")
	w := newWriter(t, db, 11)
	w.puts(50, 100)
	if err := db.Put(nil, nil, nil); err != nil {
		t.Fatal(err)
	}
	w.flush()
	legacy, err := legacyDigest(db)
	if err != nil {
		t.Fatal(err)
	}
	current, err := db.Digest(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if legacy == current {
		t.Fatal("the two digest formats agree: the test shows nothing")
	}
	e, err := Open("/backups", &Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	info, _, err := e.Create(db)
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	for i, c := range []struct {
		digest vigil.RangeDigest
		ok     bool
	}{{legacy, true}, {current, false}, {vigil.RangeDigest{CRC64: legacy.CRC64 ^ 1, Bytes: legacy.Bytes, Keys: legacy.Keys}, false}} {
		old := info
		old.version, old.Digest = metaVersionLegacyDigest, c.digest
		if err := e.writeMeta(&old); err != nil {
			t.Fatal(err)
		}
		target := "/restored" + string(rune('a'+i))
		err := e.Restore(info.ID, target)
		switch {
		case c.ok && err != nil:
			t.Fatalf("restoring a version-1 backup with its legacy digest: %v", err)
		case !c.ok && !errors.Is(err, vigil.ErrCorruption):
			t.Fatalf("restoring a version-1 backup with digest %+v = %v, want ErrCorruption", c.digest, err)
		}
		if c.ok {
			want := w.m.clone()
			want[""] = ""
			if d := diffModels(restoredContents(t, fs, target), want); d != "" {
				t.Fatalf("restored:\n%s", d)
			}
		}
	}
}
