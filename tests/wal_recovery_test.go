package tests

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/vigildb/vigil"
)

// walFixture writes n keys, one synced batch each, and closes the DB with
// everything still in its WAL. It returns the FS and the WAL's path.
func walFixture(t *testing.T, n int) (vfs.FS, string) {
	fs := vfs.NewMem()
	db, err := vigil.Open("db", &vigil.Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		if err := db.Put([]byte(fmt.Sprintf("k%04d", i)), []byte(strings.Repeat("v", 200)), vigil.Sync); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	names, _ := fs.List("db")
	var wal string
	for _, n := range names {
		if strings.HasSuffix(n, ".log") && n > wal {
			wal = n
		}
	}
	return fs, "db/" + wal
}

func cloneFS(t *testing.T, src vfs.FS) vfs.FS {
	dst := vfs.NewMem()
	if _, err := vfs.Clone(src, dst, "db", "db"); err != nil {
		t.Fatal(err)
	}
	return dst
}

func damage(t *testing.T, fs vfs.FS, path string, fn func([]byte) []byte) {
	f, err := fs.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := f.Stat()
	b := make([]byte, st.Size())
	f.ReadAt(b, 0)
	f.Close()
	b = fn(b)
	w, err := fs.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w.Write(b)
	w.Sync()
	w.Close()
}

// keysPresent returns which of the n keys read back, failing on wrong data.
func keysPresent(t *testing.T, db *vigil.DB, n int) []bool {
	out := make([]bool, n)
	for i := range out {
		v, err := db.Get([]byte(fmt.Sprintf("k%04d", i)))
		switch {
		case err == nil && string(v) == strings.Repeat("v", 200):
			out[i] = true
		case errors.Is(err, vigil.ErrNotFound):
		default:
			t.Fatalf("k%04d: %q, %v", i, v, err)
		}
	}
	return out
}

// TestWALRecoveryModes damages a WAL in the middle and at the tail and opens
// it under each WALRecoveryMode: point in time and tolerate-corrupted-tail
// accept only a torn tail (damage with intact records after it is
// corruption); absolute consistency accepts no damage at all; skip-any
// keeps every intact record.
func TestWALRecoveryModes(t *testing.T) {
	const n = 300
	base, walPath := walFixture(t, n)
	type outcome struct {
		openFails bool
		present   string // "prefix", "all-but-some"
	}
	cases := []struct {
		name   string
		damage func([]byte) []byte
		want   map[vigil.WALRecoveryMode]outcome
	}{
		// Damage followed by intact records cannot be a torn write: every
		// mode but skip-any refuses to open.
		{"flipped byte mid-log", func(b []byte) []byte { b[dataEnd(b)/2] ^= 0x40; return b }, map[vigil.WALRecoveryMode]outcome{
			vigil.WALRecoverPointInTime:    {true, ""},
			vigil.WALTolerateCorruptedTail: {true, ""},
			vigil.WALAbsoluteConsistency:   {true, ""},
			vigil.WALSkipAnyCorrupted:      {false, "all-but-some"},
		}},
		{"torn tail", func(b []byte) []byte { return b[:dataEnd(b)-100] }, map[vigil.WALRecoveryMode]outcome{
			vigil.WALRecoverPointInTime:    {false, "prefix"},
			vigil.WALTolerateCorruptedTail: {false, "prefix"},
			vigil.WALAbsoluteConsistency:   {true, ""},
			vigil.WALSkipAnyCorrupted:      {false, "prefix"},
		}},
	}
	for _, c := range cases {
		for mode, want := range c.want {
			t.Run(fmt.Sprintf("%s/%s", c.name, mode), func(t *testing.T) {
				fs := cloneFS(t, base)
				damage(t, fs, walPath, c.damage)
				db, err := vigil.Open("db", &vigil.Options{FS: fs, WALRecoveryMode: mode})
				if want.openFails {
					if !errors.Is(err, vigil.ErrCorruption) {
						t.Fatalf("Open = %v, want ErrCorruption", err)
					}
					return
				}
				if err != nil {
					t.Fatalf("Open: %v", err)
				}
				defer db.Close()
				present := keysPresent(t, db, n)
				got := 0
				prefix := true
				for i, p := range present {
					if p {
						got++
						if i > 0 && !present[i-1] {
							prefix = false
						}
					}
				}
				switch want.present {
				case "prefix":
					if !prefix || got == 0 || got == n {
						t.Fatalf("recovered %d of %d keys, prefix=%v; want a proper prefix", got, n, prefix)
					}
				case "all-but-some":
					if got == n || got < n-5 || prefix {
						t.Fatalf("recovered %d of %d keys, prefix=%v; want all but the damaged record", got, n, prefix)
					}
				}
			})
		}
	}
}
