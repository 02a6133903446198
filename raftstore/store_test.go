package raftstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/hashicorp/raft"
	"github.com/vigildb/vigil"
)

func memOptions(fs vfs.FS) *vigil.Options {
	return &vigil.Options{FS: fs, WriteBufferSize: 256 << 10}
}

func openTestStore(t *testing.T, fs vfs.FS, prefix string) *Store {
	t.Helper()
	s, err := Open("/db", &Options{Vigil: memOptions(fs), Prefix: []byte(prefix)})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func logsRange(lo, hi uint64, term uint64) []*raft.Log {
	var logs []*raft.Log
	for i := lo; i <= hi; i++ {
		logs = append(logs, &raft.Log{Index: i, Term: term, Data: fmt.Appendf(nil, "cmd-%d-%d", i, term)})
	}
	return logs
}

func checkBounds(t *testing.T, s *Store, first, last uint64) {
	t.Helper()
	f, _ := s.FirstIndex()
	l, _ := s.LastIndex()
	if f != first || l != last {
		t.Fatalf("bounds = [%d, %d], want [%d, %d]", f, l, first, last)
	}
}

func checkHas(t *testing.T, s *Store, index uint64, want bool, term uint64) {
	t.Helper()
	var l raft.Log
	err := s.GetLog(index, &l)
	switch {
	case want && err != nil:
		t.Fatalf("GetLog(%d): %v", index, err)
	case !want && err != raft.ErrLogNotFound:
		t.Fatalf("GetLog(%d) = %v, want raft.ErrLogNotFound", index, err)
	case want && (l.Index != index || l.Term != term || string(l.Data) != fmt.Sprintf("cmd-%d-%d", index, term)):
		t.Fatalf("GetLog(%d) = %+v", index, l)
	}
}

func TestStoreLog(t *testing.T) {
	for _, prefix := range []string{"", "raft/"} {
		t.Run(fmt.Sprintf("prefix=%q", prefix), func(t *testing.T) {
			fs := vfs.NewMem()
			s := openTestStore(t, fs, prefix)
			checkBounds(t, s, 0, 0)
			checkHas(t, s, 1, false, 0)
			if err := s.StoreLogs(nil); err != nil {
				t.Fatal(err)
			}
			if err := s.StoreLog(logsRange(1, 1, 1)[0]); err != nil {
				t.Fatal(err)
			}
			checkBounds(t, s, 1, 1)
			if err := s.StoreLogs(logsRange(2, 100, 1)); err != nil {
				t.Fatal(err)
			}
			checkBounds(t, s, 1, 100)
			for i := uint64(1); i <= 100; i++ {
				checkHas(t, s, i, true, 1)
			}
			// Compaction of a prefix, then a conflicting suffix replaced.
			if err := s.DeleteRange(1, 40); err != nil {
				t.Fatal(err)
			}
			checkBounds(t, s, 41, 100)
			checkHas(t, s, 40, false, 0)
			checkHas(t, s, 41, true, 1)
			if err := s.DeleteRange(90, 100); err != nil {
				t.Fatal(err)
			}
			checkBounds(t, s, 41, 89)
			if err := s.StoreLogs(logsRange(90, 95, 2)); err != nil {
				t.Fatal(err)
			}
			checkBounds(t, s, 41, 95)
			checkHas(t, s, 92, true, 2)
			// A middle range changes no bound; out-of-range and inverted
			// ones are no-ops.
			for _, r := range [][2]uint64{{50, 60}, {1, 10}, {200, 300}, {70, 60}} {
				if err := s.DeleteRange(r[0], r[1]); err != nil {
					t.Fatal(err)
				}
			}
			checkBounds(t, s, 41, 95)
			checkHas(t, s, 55, false, 0)
			// Reopen: the bounds come back from the keys.
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s = openTestStore(t, fs, prefix)
			checkBounds(t, s, 41, 95)
			checkHas(t, s, 95, true, 2)
			// Delete around gaps: the bounds skip to the next entry present.
			if err := s.DeleteRange(41, 49); err != nil {
				t.Fatal(err)
			}
			checkBounds(t, s, 61, 95)
			if err := s.DeleteRange(0, 1<<64-1); err != nil {
				t.Fatal(err)
			}
			checkBounds(t, s, 0, 0)
			checkHas(t, s, 61, false, 0)
			if err := s.StoreLogs(logsRange(500, 510, 3)); err != nil {
				t.Fatal(err)
			}
			checkBounds(t, s, 500, 510)
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestStoreGapsAndIndexZero(t *testing.T) {
	s := openTestStore(t, vfs.NewMem(), "")
	defer s.Close()
	// Out of order, with gaps, and index 0 (raft never uses it, the
	// benchmarks do).
	logs := append(logsRange(10, 10, 1), logsRange(0, 0, 1)[0], logsRange(5, 5, 1)[0])
	if err := s.StoreLogs(logs); err != nil {
		t.Fatal(err)
	}
	checkBounds(t, s, 0, 10)
	if err := s.DeleteRange(0, 4); err != nil {
		t.Fatal(err)
	}
	checkBounds(t, s, 5, 10)
	if err := s.DeleteRange(6, 20); err != nil {
		t.Fatal(err)
	}
	checkBounds(t, s, 5, 5)
}

func TestStoreSharedDB(t *testing.T) {
	db, err := vigil.Open("/db", memOptions(vfs.NewMem()))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	a, err := New(db, &Options{Prefix: []byte("a/")})
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(db, &Options{Prefix: []byte("b/")})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.StoreLogs(logsRange(1, 10, 1)); err != nil {
		t.Fatal(err)
	}
	if err := b.StoreLogs(logsRange(20, 30, 1)); err != nil {
		t.Fatal(err)
	}
	if err := a.DeleteRange(0, 1<<64-1); err != nil {
		t.Fatal(err)
	}
	checkBounds(t, a, 0, 0)
	checkBounds(t, b, 20, 30)
	if err := a.Set([]byte("k"), []byte("a")); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Get([]byte("k")); err != ErrKeyNotFound {
		t.Fatalf("b.Get = %v, want ErrKeyNotFound", err)
	}
	// A Store from New leaves the DB open.
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	b2, err := New(db, &Options{Prefix: []byte("b/")})
	if err != nil {
		t.Fatal(err)
	}
	checkBounds(t, b2, 20, 30)
}

func TestStableStore(t *testing.T) {
	fs := vfs.NewMem()
	s := openTestStore(t, fs, "")
	v, err := s.Get([]byte("missing"))
	// hashicorp/raft tells a missing key by this text.
	if err == nil || err.Error() != "not found" || v != nil {
		t.Fatalf("Get(missing) = %q, %v; want the error \"not found\"", v, err)
	}
	if !errors.Is(err, vigil.ErrNotFound) {
		t.Fatalf("missing key error %v does not match vigil.ErrNotFound", err)
	}
	if _, err := s.GetUint64([]byte("missing")); err == nil || err.Error() != "not found" {
		t.Fatalf("GetUint64(missing) = %v", err)
	}
	if err := s.Set([]byte("k"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	if err := s.Set([]byte("empty"), nil); err != nil {
		t.Fatal(err)
	}
	if err := s.SetUint64([]byte("term"), 1<<40+3); err != nil {
		t.Fatal(err)
	}
	// Stable keys and log keys do not collide.
	if err := s.StoreLogs(logsRange(1, 3, 1)); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = openTestStore(t, fs, "")
	defer s.Close()
	if v, err := s.Get([]byte("k")); err != nil || string(v) != "v" {
		t.Fatalf("Get(k) = %q, %v", v, err)
	}
	if v, err := s.Get([]byte("empty")); err != nil || len(v) != 0 {
		t.Fatalf("Get(empty) = %q, %v", v, err)
	}
	if n, err := s.GetUint64([]byte("term")); err != nil || n != 1<<40+3 {
		t.Fatalf("GetUint64 = %d, %v", n, err)
	}
	if _, err := s.GetUint64([]byte("k")); !errors.Is(err, vigil.ErrCorruption) {
		t.Fatalf("GetUint64 of a 1-byte value = %v, want ErrCorruption", err)
	}
	checkBounds(t, s, 1, 3)
}

func TestStoreCorruptValue(t *testing.T) {
	s := openTestStore(t, vfs.NewMem(), "")
	defer s.Close()
	if err := s.StoreLogs(logsRange(1, 2, 1)); err != nil {
		t.Fatal(err)
	}
	// A value that is not an entry, and an entry under the wrong index.
	if err := s.DB().Put(s.appendLogKey(nil, 1), []byte{9, 9, 9}, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.DB().Put(s.appendLogKey(nil, 2), AppendLog(nil, &raft.Log{Index: 3}), nil); err != nil {
		t.Fatal(err)
	}
	var l raft.Log
	for _, i := range []uint64{1, 2} {
		if err := s.GetLog(i, &l); !errors.Is(err, vigil.ErrCorruption) {
			t.Fatalf("GetLog(%d) = %v, want ErrCorruption", i, err)
		}
	}
	// A floor that is not 8 bytes fails Open.
	if err := s.DB().Put(s.floorKey, []byte{1, 2, 3}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := New(s.DB(), nil); !errors.Is(err, vigil.ErrCorruption) {
		t.Fatalf("New over a bad floor = %v, want ErrCorruption", err)
	}
	// A floor above the last entry (stored entries 1 and 2) fails Open.
	if err := s.DB().Put(s.floorKey, binary.BigEndian.AppendUint64(nil, 3), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := New(s.DB(), nil); !errors.Is(err, vigil.ErrCorruption) {
		t.Fatalf("New under a floor above the log = %v, want ErrCorruption", err)
	}
	if err := s.DB().Delete(s.floorKey, nil); err != nil {
		t.Fatal(err)
	}
	// A foreign key in the log range fails Open.
	if err := s.DB().Put([]byte("lshort"), []byte("x"), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := New(s.DB(), nil); !errors.Is(err, vigil.ErrCorruption) {
		t.Fatalf("New over a bad log key = %v, want ErrCorruption", err)
	}
}

func TestStoreClosed(t *testing.T) {
	s := openTestStore(t, vfs.NewMem(), "")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	var l raft.Log
	if err := s.GetLog(1, &l); !errors.Is(err, vigil.ErrClosed) {
		t.Fatalf("GetLog after Close = %v", err)
	}
	if err := s.StoreLogs(logsRange(1, 1, 1)); !errors.Is(err, vigil.ErrClosed) {
		t.Fatalf("StoreLogs after Close = %v", err)
	}
	if err := s.Set([]byte("a"), nil); !errors.Is(err, vigil.ErrClosed) {
		t.Fatalf("Set after Close = %v", err)
	}
}

func TestGetLogAllocs(t *testing.T) {
	s := openTestStore(t, vfs.NewMem(), "")
	defer s.Close()
	if err := s.StoreLogs(logsRange(1, 10, 1)); err != nil {
		t.Fatal(err)
	}
	var l raft.Log
	n := testing.AllocsPerRun(200, func() {
		if err := s.GetLog(5, &l); err != nil {
			t.Fatal(err)
		}
	})
	// The value itself, which the caller keeps.
	if n > 1 {
		t.Errorf("GetLog allocates %v times, want 1", n)
	}
}

func newMemFS() vfs.FS { return vfs.NewMem() }
