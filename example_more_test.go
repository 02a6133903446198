package vigil_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log"
	"strings"
	"sync"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/vigildb/vigil"
)

// openMem opens a DB on an in-memory file system, as the examples and tests
// do; a real DB passes a directory and nil options.
func openMem(fs vfs.FS, dir string) *vigil.DB {
	db, err := vigil.Open(dir, &vigil.Options{FS: fs})
	if err != nil {
		log.Fatal(err)
	}
	return db
}

// A batch commits several writes atomically: readers see all of them or
// none, and after a crash it is all there or not at all.
func ExampleBatch() {
	db := openMem(vfs.NewMem(), "db")
	defer db.Close()
	_ = db.Put([]byte("account/alice"), []byte("100"), nil)
	_ = db.Put([]byte("session/1"), []byte("x"), nil)
	_ = db.Put([]byte("session/2"), []byte("y"), nil)

	b := db.NewBatch()
	b.Put([]byte("account/alice"), []byte("70"))
	b.Put([]byte("account/bob"), []byte("30"))
	b.Delete([]byte("account/carol"))
	b.DeleteRange([]byte("session/"), []byte("session/\xff")) // [start, end)
	fmt.Println("records:", b.Count())

	// The batch's operations, in the order they were added.
	r := b.Reader()
	for kind, k, v, ok := r.Next(); ok; kind, k, v, ok = r.Next() {
		fmt.Printf("  %v %s %q\n", kind, k, v)
	}
	if err := db.Apply(b, vigil.Sync); err != nil { // Sync: waits for the WAL fsync
		log.Fatal(err)
	}

	for _, k := range []string{"account/alice", "account/bob", "session/1"} {
		v, err := db.Get([]byte(k))
		if errors.Is(err, vigil.ErrNotFound) {
			fmt.Println(k, "not found")
			continue
		}
		fmt.Printf("%s=%s\n", k, v)
	}
	// Output:
	// records: 4
	//   put account/alice "70"
	//   put account/bob "30"
	//   delete account/carol ""
	//   delete-range session/ "session/\xff"
	// account/alice=70
	// account/bob=30
	// session/1 not found
}

// An iterator sees only the keys in [LowerBound, UpperBound), in both
// directions, whatever it is positioned with.
func ExampleIterOptions() {
	db := openMem(vfs.NewMem(), "db")
	defer db.Close()
	for _, k := range []string{"a/1", "b/1", "b/2", "b/3", "c/1"} {
		_ = db.Put([]byte(k), []byte("v"), nil)
	}

	it, err := db.NewIter(&vigil.IterOptions{
		LowerBound: []byte("b/"), // inclusive
		UpperBound: []byte("c/"), // exclusive
	})
	if err != nil {
		log.Fatal(err)
	}
	defer it.Close()
	var fwd, rev []string
	for it.First(); it.Valid(); it.Next() {
		fwd = append(fwd, string(it.Key()))
	}
	for it.Last(); it.Valid(); it.Prev() {
		rev = append(rev, string(it.Key()))
	}
	fmt.Println(strings.Join(fwd, " "))
	fmt.Println(strings.Join(rev, " "))
	if it.SeekGE([]byte("b/2")) {
		fmt.Println("SeekGE(b/2):", string(it.Key()))
	}
	if !it.SeekGE([]byte("c/1")) { // past the upper bound
		fmt.Println("SeekGE(c/1): not valid")
	}
	if !it.SeekLT([]byte("a/9")) { // below the lower bound
		fmt.Println("SeekLT(a/9): not valid")
	}
	// Output:
	// b/1 b/2 b/3
	// b/3 b/2 b/1
	// SeekGE(b/2): b/2
	// SeekGE(c/1): not valid
	// SeekLT(a/9): not valid
}

// A snapshot's iterator, like its Get, sees the DB as it was when the
// snapshot was taken, even after flushes and compactions.
func ExampleSnapshot_NewIter() {
	db := openMem(vfs.NewMem(), "db")
	defer db.Close()
	_ = db.Put([]byte("k1"), []byte("v1"), nil)
	_ = db.Put([]byte("k2"), []byte("v2"), nil)

	snap := db.NewSnapshot()
	defer snap.Close()

	_ = db.Delete([]byte("k1"), nil)
	_ = db.Put([]byte("k2"), []byte("v2'"), nil)
	_ = db.Put([]byte("k3"), []byte("v3"), nil)
	if err := db.Flush(); err != nil {
		log.Fatal(err)
	}
	if err := db.Compact(nil, nil); err != nil {
		log.Fatal(err)
	}

	show := func(name string, it *vigil.Iterator, err error) {
		if err != nil {
			log.Fatal(err)
		}
		defer it.Close()
		fmt.Print(name, ":")
		for it.First(); it.Valid(); it.Next() {
			fmt.Printf(" %s=%s", it.Key(), it.Value())
		}
		fmt.Println()
	}
	it, err := snap.NewIter(nil)
	show("snapshot", it, err)
	it, err = db.NewIter(nil)
	show("now", it, err)
	// Output:
	// snapshot: k1=v1 k2=v2
	// now: k2=v2' k3=v3
}

// A checkpoint is a consistent copy of the DB, taken while it stays open,
// that opens as a DB of its own.
func ExampleDB_Checkpoint() {
	fs := vfs.NewMem()
	db := openMem(fs, "db")
	defer db.Close()
	_ = db.Put([]byte("flushed"), []byte("in a table"), nil)
	if err := db.Flush(); err != nil {
		log.Fatal(err)
	}
	_ = db.Put([]byte("unflushed"), []byte("in the WAL"), nil)

	if err := db.Checkpoint("db-copy"); err != nil { // must not exist yet
		log.Fatal(err)
	}
	_ = db.Put([]byte("written-later"), []byte("not in the copy"), nil)

	cp := openMem(fs, "db-copy")
	defer cp.Close()
	it, err := cp.NewIter(nil)
	if err != nil {
		log.Fatal(err)
	}
	for it.First(); it.Valid(); it.Next() {
		fmt.Printf("%s=%s\n", it.Key(), it.Value())
	}
	if err := it.Close(); err != nil {
		log.Fatal(err)
	}
	a, _ := db.Checksum(nil, []byte("written-later")) // the range the copy holds
	b, _ := cp.Checksum(nil, nil)
	fmt.Println("same pairs:", a == b)
	// Output:
	// flushed=in a table
	// unflushed=in the WAL
	// same pairs: true
}

// Two replicas that hold the same pairs have the same digest, whatever
// their histories (here one has everything in its memtable, the other in
// compacted tables after overwrites and deletions). Digests of adjacent
// ranges compose, so replicas can compare a range in pieces.
func ExampleDB_Digest() {
	fs := vfs.NewMem()
	r1 := openMem(fs, "replica1")
	defer r1.Close()
	r2 := openMem(fs, "replica2")
	defer r2.Close()

	for _, k := range []string{"a", "b", "c", "d"} {
		_ = r1.Put([]byte(k), []byte("v-"+k), nil)
	}

	_ = r2.Put([]byte("d"), []byte("old"), nil)
	_ = r2.Put([]byte("x"), []byte("gone soon"), nil)
	_ = r2.Flush()
	_ = r2.Put([]byte("a"), []byte("v-a"), nil)
	_ = r2.Put([]byte("b"), []byte("v-b"), nil)
	_ = r2.Put([]byte("d"), []byte("v-d"), nil)
	_ = r2.Delete([]byte("x"), nil)
	_ = r2.Flush()
	_ = r2.Put([]byte("c"), []byte("v-c"), nil)
	_ = r2.Compact(nil, nil)

	d1, _ := r1.Digest(nil, nil)
	d2, _ := r2.Digest(nil, nil)
	fmt.Println("keys:", d1.Keys, d2.Keys)
	fmt.Println("equal:", d1 == d2)

	// [nil, "c") followed by ["c", nil) is the whole key space.
	lo, _ := r2.Digest(nil, []byte("c"))
	hi, _ := r2.Digest([]byte("c"), nil)
	fmt.Println("halves:", lo.Keys, hi.Keys, "composed equal:", lo.Append(hi) == d1)

	// Checksum is the digest's CRC-64 alone.
	c1, _ := r1.Checksum(nil, nil)
	fmt.Println("checksum:", c1 == d1.CRC64)

	_ = r2.Put([]byte("b"), []byte("diverged"), nil)
	d2, _ = r2.Digest(nil, nil)
	fmt.Println("after a write to one replica:", d1 == d2)
	// Output:
	// keys: 4 4
	// equal: true
	// halves: 2 2 composed equal: true
	// checksum: true
	// after a write to one replica: false
}

// An external table may carry range deletions too: once ingested, they
// delete what the DB held in their ranges, not the table's own keys.
func ExampleExternalWriter_DeleteRange() {
	fs := vfs.NewMem()
	db := openMem(fs, "db")
	defer db.Close()
	for _, k := range []string{"cache/1", "cache/2", "user/1"} {
		_ = db.Put([]byte(k), []byte("old"), nil)
	}

	w, err := vigil.NewExternalWriter(fs, "load.sst", nil) // nil: the DB's defaults
	if err != nil {
		log.Fatal(err)
	}
	if err := w.DeleteRange([]byte("cache/"), []byte("cache/\xff")); err != nil {
		log.Fatal(err)
	}
	if err := w.Set([]byte("cache/9"), []byte("new")); err != nil {
		log.Fatal(err)
	}
	if err := w.Close(); err != nil { // finishes and syncs the file
		log.Fatal(err)
	}
	if err := db.Ingest([]string{"load.sst"}); err != nil {
		log.Fatal(err)
	}

	it, err := db.NewIter(nil)
	if err != nil {
		log.Fatal(err)
	}
	defer it.Close()
	for it.First(); it.Valid(); it.Next() {
		fmt.Printf("%s=%s\n", it.Key(), it.Value())
	}
	// Output:
	// cache/9=new
	// user/1=old
}

// A transaction reads at a snapshot and commits its writes only if nothing
// it read changed meanwhile; ErrConflict says to run it again. Here a
// transfer between two accounts, retried until it commits.
func ExampleDB_Update() {
	db := openMem(vfs.NewMem(), "db")
	defer db.Close()
	_ = db.Put([]byte("account/alice"), []byte("100"), nil)
	_ = db.Put([]byte("account/bob"), []byte("0"), nil)

	transfer := func(tx *vigil.Txn) error {
		a, err := tx.Get([]byte("account/alice"))
		if err != nil {
			return err
		}
		b, err := tx.Get([]byte("account/bob"))
		if err != nil {
			return err
		}
		var na, nb int
		fmt.Sscan(string(a), &na)
		fmt.Sscan(string(b), &nb)
		_ = tx.Put([]byte("account/alice"), fmt.Appendf(nil, "%d", na-30))
		return tx.Put([]byte("account/bob"), fmt.Appendf(nil, "%d", nb+30))
	}
	for {
		err := db.Update(transfer)
		if errors.Is(err, vigil.ErrConflict) {
			continue // another commit changed a balance this one read
		}
		if err != nil {
			log.Fatal(err)
		}
		break
	}
	_ = db.View(func(tx *vigil.Txn) error {
		it, _ := tx.NewIter(&vigil.IterOptions{LowerBound: []byte("account/"), UpperBound: []byte("account0")})
		defer it.Close()
		for it.First(); it.Valid(); it.Next() {
			fmt.Printf("%s = %s\n", it.Key(), it.Value())
		}
		return nil
	})
	// Output:
	// account/alice = 70
	// account/bob = 30
}

// An indexed batch reads its own writes over the DB before it is applied.
func ExampleDB_NewIndexedBatch() {
	db := openMem(vfs.NewMem(), "db")
	defer db.Close()
	_ = db.Put([]byte("a"), []byte("db"), nil)
	_ = db.Put([]byte("b"), []byte("db"), nil)

	b := db.NewIndexedBatch()
	b.Put([]byte("a"), []byte("batch"))
	b.Delete([]byte("b"))
	b.Put([]byte("c"), []byte("batch"))
	v, _ := b.Get([]byte("a"))
	_, err := b.Get([]byte("b"))
	fmt.Println(string(v), errors.Is(err, vigil.ErrNotFound))
	it, _ := b.NewIter(nil)
	var kvs []string
	for it.First(); it.Valid(); it.Next() {
		kvs = append(kvs, fmt.Sprintf("%s=%s", it.Key(), it.Value()))
	}
	_ = it.Close()
	fmt.Println(strings.Join(kvs, " "))
	_ = db.Apply(b, nil)
	v, _ = db.Get([]byte("c"))
	fmt.Println("applied:", string(v))
	// Output:
	// batch true
	// a=batch c=batch
	// applied: batch
}

// A merge operator updates a value without reading it: here page-view
// counters, incremented by concurrent writers with no read-modify-write
// race. Reads add the increments up; compactions fold them into one.
func ExampleDB_Merge() {
	db, err := vigil.Open("db", &vigil.Options{FS: vfs.NewMem(), Merger: vigil.Uint64AddMerger})
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	one := binary.LittleEndian.AppendUint64(nil, 1)
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 250 {
				if err := db.Merge([]byte("views/home"), one, nil); err != nil {
					log.Fatal(err)
				}
			}
		}()
	}
	wg.Wait()
	_ = db.Compact(nil, nil) // the 1000 operands become one value
	v, err := db.Get([]byte("views/home"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(binary.LittleEndian.Uint64(v))
	// Output: 1000
}
