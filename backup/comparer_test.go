package backup

import (
	"errors"
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/vigildb/vigil"
	"github.com/vigildb/vigil/internal/testcmp"
)

// TestBackupComparer: a DB of another key order backs up, verifies and
// restores with Options.Comparer; an engine without it refuses the DB.
func TestBackupComparer(t *testing.T) {
	fs := vfs.NewMem()
	db, err := vigil.Open("db", &vigil.Options{FS: fs, Comparer: testcmp.Reverse, WriteBufferSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for i := range 5000 {
		if err := db.Put([]byte(fmt.Sprintf("k%05d", i)), []byte(fmt.Sprint(i)), nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	plain, err := Open("bk-plain", &Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := plain.Create(db); !errors.Is(err, vigil.ErrInvalidArgument) {
		t.Fatalf("a backup without the DB's comparer: %v, want ErrInvalidArgument", err)
	}
	plain.Close()

	e, err := Open("bk", &Options{FS: fs, Comparer: testcmp.Reverse})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	info, _, err := e.Create(db)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Verify(info.ID); err != nil {
		t.Fatal(err)
	}
	if err := e.Restore(info.ID, "restored"); err != nil {
		t.Fatal(err)
	}
	r, err := vigil.Open("restored", &vigil.Options{FS: fs, Comparer: testcmp.Reverse})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	a, err := db.Checksum(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := r.Checksum(nil, nil); err != nil || a != b {
		t.Fatalf("restored checksum %#x, %v; want %#x", b, err, a)
	}
}
