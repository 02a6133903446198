package vigil

import (
	"slices"
	"testing"
	"time"
)

// TestCheckpointPointSkipsSpareWAL: the consistent point copies the WALs up
// to the live one, never the spare prepared ahead of the next rotation. The
// spare holds no batch of the point, and once a rotation makes it live it
// is written while the copy reads it (vigil stress --crash=inprocess saw
// "zeroed bytes followed by data" there).
func TestCheckpointPointSkipsSpareWAL(t *testing.T) {
	db, err := Open(t.TempDir(), &Options{WriteBufferSize: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	val := make([]byte, 1000)
	spare := uint64(0)
	for i := 0; i < 2000 && spare == 0; i++ {
		if err := db.Put([]byte{byte(i), byte(i >> 8)}, val, nil); err != nil {
			t.Fatal(err)
		}
		db.mu.Lock()
		spare = db.wal.spareNum
		db.mu.Unlock()
		if spare == 0 {
			time.Sleep(time.Millisecond)
		}
	}
	if spare == 0 {
		t.Fatal("no spare WAL was prepared")
	}
	p, err := db.checkpointPoint()
	if err != nil {
		t.Fatal(err)
	}
	defer p.release(db)
	db.mu.Lock()
	spare = db.wal.spareNum
	db.mu.Unlock()
	if !slices.Contains(p.wals, p.liveWAL) {
		t.Fatalf("point's WALs %v lack the live WAL %d", p.wals, p.liveWAL)
	}
	for _, n := range p.wals {
		if n > p.liveWAL {
			t.Fatalf("point's WALs %v include %d, newer than the live WAL %d (spare %d)", p.wals, n, p.liveWAL, spare)
		}
	}
}
