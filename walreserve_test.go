package vigil

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/vigildb/vigil/checksum"
	"github.com/vigildb/vigil/wal"
)

// TestWALReserveNeedsChecksums: a WAL keeps zeros past its records only
// when its fragments carry checksums. Without them, a process killed inside
// a write(2) left an append's first pages before the zeros, and recovery
// read that as a whole record ending in zeros (vigil stress --crash=kill,
// checksum none); without the reserve the file ends where the write stopped.
func TestWALReserveNeedsChecksums(t *testing.T) {
	for _, tc := range []struct {
		ct      checksum.Type
		reserve bool
	}{{checksum.None, false}, {checksum.XXH3, true}, {checksum.CRC32c, true}} {
		t.Run(tc.ct.String(), func(t *testing.T) {
			dir := t.TempDir()
			db, err := Open(dir, &Options{ChecksumType: tc.ct})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			for i := 0; i < 10; i++ {
				if err := db.Put([]byte{byte(i)}, []byte("value"), &WriteOptions{Sync: true}); err != nil {
					t.Fatal(err)
				}
			}
			logical := db.wal.live.Size()
			matches, err := filepath.Glob(filepath.Join(dir, "*.log"))
			if err != nil || len(matches) == 0 {
				t.Fatalf("no WAL in %s (%v)", dir, err)
			}
			var size int64
			for _, m := range matches {
				st, err := os.Stat(m)
				if err != nil {
					t.Fatal(err)
				}
				size = max(size, st.Size())
			}
			if got := size > logical; got != tc.reserve {
				t.Fatalf("WAL file of %d bytes for a %d-byte log: reserve %v, want %v", size, logical, got, tc.reserve)
			}
		})
	}
}

// TestAheadReserve: a WAL prepared after one that took synced writes
// throughout reserves that WAL's size in zeros before its first record;
// after unsynced writes (or sparse syncs) it reserves none.
func TestAheadReserve(t *testing.T) {
	for _, tc := range []struct {
		size, waited, want int64
	}{
		{10 << 20, 160, 10 << 20},
		{10 << 20, 159, 0},
		{10 << 20, 0, 0},
		{1 << 30, 1 << 14, maxAheadReserve},
		{0, 0, 0},
	} {
		if got := aheadReserve(tc.size, wal.WriterStats{WaitedSyncs: tc.waited}); got != tc.want {
			t.Errorf("aheadReserve(%d, %d waited syncs) = %d, want %d", tc.size, tc.waited, got, tc.want)
		}
	}
	for _, synced := range []bool{true, false} {
		dir := t.TempDir()
		db, err := Open(dir, &Options{WriteBufferSize: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		val := make([]byte, 4000)
		for i := range 2000 { // ~8 MB: several rotations
			if err := db.Put(fmt.Appendf(nil, "k%06d", i), val, &WriteOptions{Sync: synced}); err != nil {
				t.Fatal(err)
			}
		}
		// The spare prepared after the last rotation, if it is ready.
		db.mu.Lock()
		spare, prev := db.wal.spare, db.wal.ahead
		db.mu.Unlock()
		if synced && prev < 512<<10 {
			t.Errorf("synced writes: the next WAL reserves %d bytes ahead, want about a WAL's size", prev)
		}
		if !synced && prev != 0 {
			t.Errorf("unsynced writes: the next WAL reserves %d bytes ahead, want 0", prev)
		}
		if spare != nil && synced && spare.Stats().Reserved != prev {
			t.Errorf("the spare reserved %d bytes, want %d", spare.Stats().Reserved, prev)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		db, err = Open(dir, nil)
		if err != nil {
			t.Fatal(err)
		}
		if v, err := db.Get([]byte("k001999")); err != nil || len(v) != len(val) {
			t.Fatalf("after a reopen: %d bytes, %v", len(v), err)
		}
		_ = db.Close()
	}
}
