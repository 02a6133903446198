package tests

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/vigildb/vigil"
)

// Merge read paths where an operand the Merger refuses must not fail a
// read that does not need it: found while extending the crash tests and
// the stress runner to merges, fixed since.

func le64(n uint64) []byte { return binary.LittleEndian.AppendUint64(nil, n) }

// TestMergeReverseIterMergeErrorUnderRangeDel: a merge operand the
// Merger refuses (uint64add: 3 bytes, not 8), then a range deletion over
// the key, then a valid operand. The key's value is the last operand: the
// range deletion ends the chain, so the bad operand is never needed, and
// Get and a forward scan return 7. A backward scan stops with the merge
// error instead: Iterator.prevVersion (iterator.go) keeps the error of a
// failed merge in prevChain.err until a Set or a point deletion clears it,
// and returns early for every operand while it is set, without checking
// whether a range tombstone newer than the failed operand covers it (its
// value path does: existing is dropped when the tombstone covers
// ch.haveSeq). Fixed: prevVersion checks the tombstone.
//
// Operations (DB with Uint64AddMerger, memtable or operand flushed below):
//
//	Merge("k", "bad"); DeleteRange("a", "z"); Merge("k", le64(7))
//	Get("k")            = 07 00 00 00 00 00 00 00   (right)
//	First()             = "k" → 07 00 ...            (right)
//	Last()              = false, Error() = "vigil: merging the operands of
//	                      key 6b: uint64add: operand for key 6b has 3 bytes,
//	                      not 8: vigil: bad merge operand"   (want "k" → 7)
func TestMergeReverseIterMergeErrorUnderRangeDel(t *testing.T) {
	for _, flushed := range []bool{false, true} {
		db, err := vigil.Open("db", &vigil.Options{FS: vfs.NewMem(), Merger: vigil.Uint64AddMerger})
		if err != nil {
			t.Fatal(err)
		}
		must(t, db.Merge([]byte("k"), []byte("bad"), nil))
		if flushed {
			must(t, db.Flush())
		}
		must(t, db.DeleteRange([]byte("a"), []byte("z"), nil))
		must(t, db.Merge([]byte("k"), le64(7), nil))
		if v, err := db.Get([]byte("k")); err != nil || !bytes.Equal(v, le64(7)) {
			t.Fatalf("flushed=%v: Get = %x, %v; want 07...", flushed, v, err)
		}
		for _, forward := range []bool{true, false} {
			it, err := db.NewIter(nil)
			if err != nil {
				t.Fatal(err)
			}
			ok := it.First()
			if !forward {
				ok = it.Last()
			}
			if !ok || string(it.Key()) != "k" || !bytes.Equal(it.Value(), le64(7)) {
				t.Errorf("flushed=%v forward=%v: iterator at %q = %x (valid %v, error %v); want \"k\" = %x as Get returns",
					flushed, forward, it.Key(), it.Value(), ok, it.Error(), le64(7))
			}
			it.Close()
		}
		db.Close()
	}
}

// TestMergeTxnIterMergeErrorUnderOwnDelete: the DB holds a merge
// operand the Merger refuses; a transaction deletes the key (Delete or
// DeleteRange) and merges a valid operand into it. Txn.Get returns that
// operand's value, 7: the transaction's deletion hides the DB's operand.
// Its iterator stops with the merge error instead, in both directions:
// the batch overlay (batch_iter.go) lays the batch over a DB iterator, and
// the DB iterator fails at the key (folding the DB's operands) before the
// overlay can see that its own deletion hides them (findNext/findPrev stop
// on the DB side's error). Fixed: the overlay's DB iterator defers the
// error (Iterator.deferMergeErr) to the overlay.
//
//	db.Merge("k", "bad")
//	tx.Delete("k") (or tx.DeleteRange("a", "z")); tx.Merge("k", le64(7))
//	tx.Get("k")         = 07 00 00 00 00 00 00 00   (right)
//	tx iterator First() and Last() = false, Error() = "vigil: merging the
//	                      operands of key 6b: uint64add: operand for key 6b
//	                      has 3 bytes, not 8: vigil: bad merge operand"
func TestMergeTxnIterMergeErrorUnderOwnDelete(t *testing.T) {
	for _, rangeDel := range []bool{false, true} {
		db, err := vigil.Open("db", &vigil.Options{FS: vfs.NewMem(), Merger: vigil.Uint64AddMerger})
		if err != nil {
			t.Fatal(err)
		}
		must(t, db.Merge([]byte("k"), []byte("bad"), nil))
		tx := db.NewTxn()
		if rangeDel {
			must(t, tx.DeleteRange([]byte("a"), []byte("z")))
		} else {
			must(t, tx.Delete([]byte("k")))
		}
		must(t, tx.Merge([]byte("k"), le64(7)))
		if v, err := tx.Get([]byte("k")); err != nil || !bytes.Equal(v, le64(7)) {
			t.Fatalf("rangeDel=%v: Txn.Get = %x, %v; want 07...", rangeDel, v, err)
		}
		for _, forward := range []bool{true, false} {
			it, err := tx.NewIter(nil)
			if err != nil {
				t.Fatal(err)
			}
			ok := it.First()
			if !forward {
				ok = it.Last()
			}
			if !ok || string(it.Key()) != "k" || !bytes.Equal(it.Value(), le64(7)) {
				t.Errorf("rangeDel=%v forward=%v: Txn iterator at %q = %x (valid %v, error %v); want \"k\" = %x as Txn.Get returns",
					rangeDel, forward, it.Key(), it.Value(), ok, it.Error(), le64(7))
			}
			it.Close()
		}
		tx.Discard()
		db.Close()
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
