package sst_test

import (
	"fmt"
	"log"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/vigildb/vigil"
	"github.com/vigildb/vigil/sst"
)

// Reading a table with package sst: its properties, then its entries with
// their sequence numbers and kinds. (The table here is written by
// vigil.NewExternalWriter; a DB's own tables are the same format.)
func ExampleOpenFile() {
	fs := vfs.NewMem()
	w, err := vigil.NewExternalWriter(fs, "000001.sst", nil)
	if err != nil {
		log.Fatal(err)
	}
	_ = w.Set([]byte("apple"), []byte("red"))
	_ = w.Delete([]byte("banana"))
	_ = w.Set([]byte("cherry"), []byte("dark red"))
	_ = w.DeleteRange([]byte("d"), []byte("f"))
	if err := w.Close(); err != nil {
		log.Fatal(err)
	}

	r, err := sst.OpenFile(fs, "000001.sst", sst.ReaderOptions{}) // verifies all but the data blocks
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	p := r.Properties()
	fmt.Println("checksum:", r.ChecksumType(), "compression:", p.Compression, "external:", p.External)
	fmt.Println("entries:", p.NumEntries, "deletions:", p.NumDeletions, "range deletions:", p.NumRangeDels)

	it := r.NewIter(nil, nil) // point entries; nil bounds = the whole table
	for it.First(); it.Valid(); it.Next() {
		k := it.Key()
		fmt.Printf("%s #%d %v = %q\n", k.UserKey, k.SeqNum(), k.Kind(), it.Value())
	}
	if err := it.Close(); err != nil {
		log.Fatal(err)
	}
	for _, t := range r.RangeDels() {
		fmt.Printf("range deletion [%s, %s)\n", t.Start, t.End)
	}
	if err := r.Verify(); err != nil { // re-reads the file, every block's checksum
		log.Fatal(err)
	}
	fmt.Println("verified")
	// Output:
	// checksum: xxh3 compression: snappy external: true
	// entries: 3 deletions: 1 range deletions: 1
	// apple #0 SET = "red"
	// banana #0 DEL = ""
	// cherry #0 SET = "dark red"
	// range deletion [d, f)
	// verified
}
