package backup

import (
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/vigildb/vigil"
)

// TestBackupRecycledWALs: a backup of a DB that writes its WALs over
// obsolete ones (vigil.Options.WALRecycleFiles) verifies and restores with
// every write.
func TestBackupRecycledWALs(t *testing.T) {
	fs := vfs.NewMem()
	db, err := vigil.Open("db", &vigil.Options{FS: fs, WriteBufferSize: 1 << 20, WALRecycleFiles: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	val := make([]byte, 300)
	for i := range 24000 { // some 4 MiB of memtable entries: several rotations
		if err := db.Put([]byte(fmt.Sprintf("k%05d", i%2000)), val[:i%300], vigil.Sync); err != nil {
			t.Fatal(err)
		}
	}
	if db.Metrics().WAL.Recycled == 0 {
		t.Fatal("no WAL recycled: the test tests nothing")
	}
	e, err := Open("bk", &Options{FS: fs})
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
	r, err := vigil.Open("restored", &vigil.Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for i := range 2000 {
		k := fmt.Sprintf("k%05d", i)
		want, err := db.Get([]byte(k))
		if err != nil {
			t.Fatal(err)
		}
		if got, err := r.Get([]byte(k)); err != nil || string(got) != string(want) {
			t.Fatalf("restored %s: %d bytes, %v; want %d bytes", k, len(got), err, len(want))
		}
	}
}
