package tests

import (
	"errors"
	"fmt"
	"github.com/vigildb/vigil/internal/private"
	"testing"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/vigildb/vigil"
)

const paranoidKeys = 20000

func paranoidKey(i int) []byte { return []byte(fmt.Sprintf("key%06d", i)) }

// fillAndCorrupt writes paranoidKeys keys to the memtable and changes the
// first byte of one key in the arena from 'k' to 'a', so that it sorts
// before all its neighbours: the skiplist is now out of order, as after a
// bit flip in RAM.
func fillAndCorrupt(t *testing.T, opts *vigil.Options) (*vigil.DB, int) {
	t.Helper()
	db, err := vigil.Open("db", opts)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < paranoidKeys; i++ {
		if err := db.Put(paranoidKey(i), []byte(fmt.Sprintf("value%d", i)), nil); err != nil {
			t.Fatal(err)
		}
	}
	victim := paranoidKeys / 2
	if !private.MemtableEntryBytes(db, paranoidKey(victim), func(k, v []byte) { k[0] = 'a' }) {
		t.Fatal("key not found in the memtable")
	}
	return db, victim
}

// TestParanoidChecksEndToEnd corrupts a memtable key. With
// ParanoidMemoryChecks, Get of the key and full scans in both directions
// report ErrCorruption; without, the same reads return wrong answers
// silently (that is what the option buys); and in both cases a flush refuses
// to write the corrupt memtable, turns the DB read-only, and keeps the WAL,
// so a reopen recovers every key intact.
func TestParanoidChecksEndToEnd(t *testing.T) {
	for _, paranoid := range []bool{true, false} {
		t.Run(fmt.Sprintf("paranoid=%v", paranoid), func(t *testing.T) {
			fs := vfs.NewMem()
			opts := &vigil.Options{FS: fs, ParanoidMemoryChecks: paranoid}
			db, victim := fillAndCorrupt(t, opts)

			_, getErr := db.Get(paranoidKey(victim))
			it, err := db.NewIter(nil)
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for ok := it.First(); ok; ok = it.Next() {
				n++
			}
			fwdErr := it.Error()
			m := 0
			for ok := it.Last(); ok; ok = it.Prev() {
				m++
			}
			revErr := it.Error()
			seekOK := it.SeekGE(paranoidKey(victim - 1))
			if seekOK {
				for ok := true; ok; ok = it.Next() {
				}
			}
			seekErr := it.Error()
			it.Close()
			if paranoid {
				for what, err := range map[string]error{"Get": getErr, "forward scan": fwdErr, "reverse scan": revErr, "SeekGE+Next": seekErr} {
					if !errors.Is(err, vigil.ErrCorruption) {
						t.Errorf("%s with paranoid checks = %v, want ErrCorruption", what, err)
					}
				}
			} else {
				if getErr == nil || errors.Is(getErr, vigil.ErrCorruption) || fwdErr != nil || revErr != nil {
					t.Errorf("without paranoid checks: Get err %v, scan errs %v %v (want a silent wrong answer)", getErr, fwdErr, revErr)
				}
				t.Logf("without paranoid checks: Get(victim) = %v; forward scan saw %d keys, reverse %d, none reported", getErr, n, m)
			}

			// The flush validator catches it either way.
			err = db.Flush()
			if !errors.Is(err, vigil.ErrCorruption) || !errors.Is(err, vigil.ErrReadOnly) {
				t.Fatalf("Flush of a corrupt memtable = %v, want ErrReadOnly wrapping ErrCorruption", err)
			}
			if err := db.Put([]byte("more"), []byte("x"), nil); !errors.Is(err, vigil.ErrReadOnly) {
				t.Fatalf("Put after a refused flush = %v, want ErrReadOnly", err)
			}
			if m := db.Metrics(); m.Levels[0].NumFiles != 0 || m.MemTable.Corruptions == 0 {
				t.Fatalf("after the refused flush: %d L0 files, %d corruptions counted", m.Levels[0].NumFiles, m.MemTable.Corruptions)
			}
			db.Close()

			// The WAL was kept: everything comes back intact.
			db, err = vigil.Open("db", opts)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			for i := 0; i < paranoidKeys; i += 97 {
				mustGetT(t, db, paranoidKey(i), fmt.Sprintf("value%d", i))
			}
			mustGetT(t, db, paranoidKey(victim), fmt.Sprintf("value%d", victim))
			if err := db.Verify(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestProtectionBytesCatchValueFlip flips one bit of a value in the
// memtable: with 8 protection bytes, the read of that entry reports
// ErrCorruption instead of returning the altered value.
func TestProtectionBytesCatchValueFlip(t *testing.T) {
	db, err := vigil.Open("db", &vigil.Options{FS: vfs.NewMem(), MemtableProtectionBytesPerKey: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for i := 0; i < 100; i++ {
		db.Put(paranoidKey(i), []byte(fmt.Sprintf("value%d", i)), nil)
	}
	if !private.MemtableEntryBytes(db, paranoidKey(42), func(k, v []byte) { v[2] ^= 4 }) {
		t.Fatal("entry not found")
	}
	if v, err := db.Get(paranoidKey(42)); !errors.Is(err, vigil.ErrCorruption) {
		t.Fatalf("Get of a flipped value = %q, %v; want ErrCorruption", v, err)
	}
	mustGetT(t, db, paranoidKey(41), "value41")
	it, _ := db.NewIter(nil)
	for ok := it.First(); ok; ok = it.Next() {
	}
	if !errors.Is(it.Error(), vigil.ErrCorruption) {
		t.Fatalf("scan over a flipped value: %v, want ErrCorruption", it.Error())
	}
	it.Close()
}

func mustGetT(t *testing.T, db *vigil.DB, k []byte, want string) {
	t.Helper()
	v, err := db.Get(k)
	if err != nil || string(v) != want {
		t.Fatalf("Get(%s) = %q, %v; want %q", k, v, err, want)
	}
}

// TestHalfAppliedBatchIsNeverVisible: a batch whose second write fails
// inside the memtable (its insert lands next to a corrupted entry, which the
// insert's neighbour check catches) must not be half visible: the memtable
// is poisoned before the batch is published, reads fail with ErrCorruption,
// and a reopen replays the whole batch from the WAL.
func TestHalfAppliedBatchIsNeverVisible(t *testing.T) {
	fs := vfs.NewMem()
	opts := &vigil.Options{FS: fs, MemtableProtectionBytesPerKey: 8}
	db, err := vigil.Open("db", opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"k0", "k2", "k4", "k6", "k8"} {
		db.Put([]byte(k), []byte("v-"+k), nil)
	}
	if !private.MemtableEntryBytes(db, []byte("k2"), func(k, v []byte) { v[0] ^= 1 }) {
		t.Fatal("no entry")
	}
	b := db.NewBatch()
	b.Put([]byte("k9"), []byte("new-k9")) // goes in next to k8: fine
	b.Put([]byte("k1"), []byte("new-k1")) // next to the corrupt k2: refused
	if err := db.Apply(b, nil); !errors.Is(err, vigil.ErrCorruption) {
		t.Fatalf("Apply = %v, want ErrCorruption", err)
	}
	if v, err := db.Get([]byte("k9")); !errors.Is(err, vigil.ErrCorruption) {
		t.Fatalf("Get(k9) = %q, %v: half of a batch is visible", v, err)
	}
	if _, err := db.NewIter(nil); !errors.Is(err, vigil.ErrCorruption) {
		t.Fatalf("NewIter over a poisoned memtable = %v", err)
	}
	db.Close()
	db, err = vigil.Open("db", opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for k, want := range map[string]string{"k1": "new-k1", "k9": "new-k9", "k2": "v-k2"} {
		mustGetT(t, db, []byte(k), want)
	}
}
