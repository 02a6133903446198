package vigil_test

import (
	"fmt"
	"log"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/vigildb/vigil"
)

// A bulk load: a table written outside the DB, then ingested whole.
func ExampleDB_Ingest() {
	fs := vfs.NewMem()
	db, err := vigil.Open("db", &vigil.Options{FS: fs})
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	if err := db.Put([]byte("user/2"), []byte("stale"), nil); err != nil {
		log.Fatal(err)
	}

	w, err := vigil.NewExternalWriter(fs, "load.sst", nil)
	if err != nil {
		log.Fatal(err)
	}
	for _, kv := range [][2]string{{"user/1", "ada"}, {"user/2", "grace"}, {"user/3", "edsger"}} {
		if err := w.Set([]byte(kv[0]), []byte(kv[1])); err != nil { // keys in increasing order
			log.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		log.Fatal(err)
	}
	if err := db.Ingest([]string{"load.sst"}); err != nil { // verified, then added atomically
		log.Fatal(err)
	}
	v, _ := db.Get([]byte("user/2"))
	fmt.Printf("user/2=%s\n", v)
	// Output: user/2=grace
}

// A replica snapshot: the range [start, end) replaced by a table's
// contents in one step.
func ExampleDB_IngestAndExcise() {
	fs := vfs.NewMem()
	db, err := vigil.Open("db", &vigil.Options{FS: fs})
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	for _, k := range []string{"r1/a", "r1/b", "r2/a"} {
		if err := db.Put([]byte(k), []byte("old"), nil); err != nil {
			log.Fatal(err)
		}
	}
	w, err := vigil.NewExternalWriter(fs, "snap.sst", nil)
	if err != nil {
		log.Fatal(err)
	}
	if err := w.Set([]byte("r1/c"), []byte("new")); err != nil {
		log.Fatal(err)
	}
	if err := w.Close(); err != nil {
		log.Fatal(err)
	}
	if err := db.IngestAndExcise([]string{"snap.sst"}, []byte("r1/"), []byte("r1/\xff")); err != nil {
		log.Fatal(err)
	}
	it, err := db.NewIter(nil)
	if err != nil {
		log.Fatal(err)
	}
	for it.First(); it.Valid(); it.Next() {
		fmt.Printf("%s=%s\n", it.Key(), it.Value())
	}
	if err := it.Close(); err != nil {
		log.Fatal(err)
	}
	// Output:
	// r1/c=new
	// r2/a=old
}
