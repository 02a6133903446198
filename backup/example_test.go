package backup_test

import (
	"errors"
	"fmt"
	"log"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/vigildb/vigil"
	"github.com/vigildb/vigil/backup"
)

// Incremental backups: Create while the DB stays open, Verify every file
// against its checksum, Restore into a new directory that opens as the DB
// as it was backed up.
func Example() {
	fs := vfs.NewMem() // the DB and the backup directory share a file system
	db, err := vigil.Open("db", &vigil.Options{FS: fs})
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	_ = db.Put([]byte("k1"), []byte("v1"), nil)
	_ = db.Flush()

	e, err := backup.Open("backups", &backup.Options{FS: fs}) // locks the backup directory
	if err != nil {
		log.Fatal(err)
	}
	defer e.Close()
	if _, err := backup.Open("backups", &backup.Options{FS: fs}); errors.Is(err, backup.ErrLocked) {
		fmt.Println("second Open: locked")
	}

	first, stats, err := e.Create(db)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("backup", first.ID, "keys:", first.Digest.Keys, "tables copied:", stats.SharedCopied)

	_ = db.Put([]byte("k2"), []byte("v2"), nil)
	_ = db.Flush()
	second, stats, err := e.Create(db) // copies only the new table
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("backup", second.ID, "keys:", second.Digest.Keys,
		"tables copied:", stats.SharedCopied, "reused:", stats.SharedReused)

	infos, _ := e.List()
	fmt.Println("backups:", len(infos))
	if err := e.Verify(second.ID); err != nil { // re-reads every file
		log.Fatal(err)
	}
	fmt.Println("verified")

	if err := e.Restore(first.ID, "restored"); err != nil { // the target must not exist
		log.Fatal(err)
	}
	r, err := vigil.Open("restored", &vigil.Options{FS: fs})
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	v, _ := r.Get([]byte("k1"))
	_, err = r.Get([]byte("k2"))
	fmt.Printf("restored backup %d: k1=%s, k2 found: %v\n", first.ID, v, err == nil)
	// Output:
	// second Open: locked
	// backup 1 keys: 1 tables copied: 1
	// backup 2 keys: 2 tables copied: 1 reused: 1
	// backups: 2
	// verified
	// restored backup 1: k1=v1, k2 found: false
}
