package raftstore

import (
	"bytes"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/vigildb/vigil"
)

// streamOfFiles is the snapshot stream of a directory holding files, built
// with the same writer Persist uses: well framed whatever the files are.
func streamOfFiles(t *testing.T, files map[string][]byte) []byte {
	t.Helper()
	fs := vfs.NewMem()
	if err := fs.MkdirAll("/s", 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range files {
		f, err := fs.Create("/s/" + name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write(data); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	return streamOfDir(t, fs, "/s")
}

func streamOfDir(t *testing.T, fs vfs.FS, dir string) []byte {
	t.Helper()
	var buf bytes.Buffer
	if _, err := writeSnapshot(&buf, fs, dir); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// srcFSM is an FSM that applied entries 1..50 (key s<i> = v<i>), with
// tables and a WAL.
func srcFSM(t *testing.T) *FSM {
	t.Helper()
	src := openTestFSM(t, vfs.NewMem(), "/src")
	for i := uint64(1); i <= 50; i++ {
		src.Apply(putCmd(i, fmt.Sprintf("s%d", i), fmt.Sprintf("v%d", i)))
		if i == 40 {
			if err := src.View(func(db *vigil.DB) error { return db.Flush() }); err != nil {
				t.Fatal(err)
			}
		}
	}
	return src
}

// checkpointStream takes a checkpoint of src, lets damage change its
// directory, and streams what is left: a stream whose framing and
// checksums are sound, whatever damage did to the files.
func checkpointStream(t *testing.T, src *FSM, damage func(fs vfs.FS, dir string, names []string)) []byte {
	t.Helper()
	snap, err := src.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Release()
	dir := snap.(*fsmSnapshot).dir
	names, err := src.fs.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(names)
	damage(src.fs, dir, names)
	return streamOfDir(t, src.fs, dir)
}

func tableOf(t *testing.T, names []string) string {
	t.Helper()
	for _, n := range names {
		if strings.HasSuffix(n, ".sst") {
			return n
		}
	}
	t.Fatalf("no table among %v", names)
	return ""
}

// flipTableByte flips one byte in the middle of the checkpoint's first
// table. The checkpoint hard-links the source's table, so the copy is
// rewritten as a file of its own first.
func flipTableByte(t *testing.T) func(fs vfs.FS, dir string, names []string) {
	return func(fs vfs.FS, dir string, names []string) {
		path := fs.PathJoin(dir, tableOf(t, names))
		f, err := fs.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		data[len(data)/3] ^= 0x01
		if err := fs.Remove(path); err != nil {
			t.Fatal(err)
		}
		w, err := fs.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(data); err != nil {
			t.Fatal(err)
		}
		w.Close()
	}
}

// plainDBStream is the stream of a sound Vigil DB that is not an FSM's: it
// has no applied-index record.
func plainDBStream(t *testing.T) []byte {
	t.Helper()
	fs := vfs.NewMem()
	db, err := vigil.Open("/db", memOptions(fs))
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Put([]byte("foreign"), []byte("value"), nil); err != nil {
		t.Fatal(err)
	}
	if err := db.Checkpoint("/ck"); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return streamOfDir(t, fs, "/ck")
}

// dstFSM opens /data/fsm on fs with entries 1..10 applied (k<i> = old<i>),
// some flushed to a table, some in the WAL only.
func dstFSM(t *testing.T, fs vfs.FS) *FSM {
	t.Helper()
	f := openTestFSM(t, fs, "/data/fsm")
	for i := uint64(1); i <= 10; i++ {
		f.Apply(putCmd(i, fmt.Sprintf("k%d", i), fmt.Sprintf("old%d", i)))
		if i == 6 {
			if err := f.View(func(db *vigil.DB) error { return db.Flush() }); err != nil {
				t.Fatal(err)
			}
		}
	}
	return f
}

// checkOldState: the FSM is exactly as dstFSM left it, plus the entries
// 11..extra, and /data holds nothing but the FSM's directory and lock.
func checkOldState(t *testing.T, f *FSM, fs vfs.FS, extra uint64) {
	t.Helper()
	if err := f.Err(); err != nil {
		t.Fatalf("FSM stopped: %v", err)
	}
	if got, want := f.AppliedIndex(), max(10, extra); got != want {
		t.Fatalf("AppliedIndex = %d, want %d", got, want)
	}
	for i := 1; i <= 10; i++ {
		checkGet(t, f, fmt.Sprintf("k%d", i), fmt.Sprintf("old%d", i))
	}
	for i := uint64(11); i <= extra; i++ {
		checkGet(t, f, fmt.Sprintf("k%d", i), fmt.Sprintf("new%d", i))
	}
	checkSource(t, f, 0)
	checkNoLeftovers(t, fs, "/data", "fsm")
}

// checkSource checks that f holds the state of srcFSM up to n (0: none of
// it).
func checkSource(t *testing.T, f *FSM, n int) {
	t.Helper()
	for _, i := range []int{1, 40, 50} {
		want := ""
		if i <= n {
			want = fmt.Sprintf("v%d", i)
		}
		checkGet(t, f, fmt.Sprintf("s%d", i), want)
	}
}

// checkNoLeftovers: parent holds base, perhaps its lock file, and whatever
// else is listed in also, nothing more.
func checkNoLeftovers(t *testing.T, fs vfs.FS, parent, base string, also ...string) {
	t.Helper()
	names, err := fs.List(parent)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if n != base && n != base+".lock" && !slices.Contains(also, n) {
			t.Errorf("%s holds %q (all: %v)", parent, n, names)
		}
	}
}

// A restore is all or nothing: a well-framed stream that does not hold an
// FSM's DB fails and leaves the FSM exactly as it was, still applying, and
// still able to restore a sound snapshot afterwards.
func TestFSMRestoreRefusesStreamWithoutDB(t *testing.T) {
	src := srcFSM(t)
	defer src.Close()
	good := checkpointStream(t, src, func(vfs.FS, string, []string) {})
	cases := []struct {
		name   string
		stream func(t *testing.T) []byte
	}{
		{"no files", func(t *testing.T) []byte { return streamOfFiles(t, nil) }},
		{"stray file", func(t *testing.T) []byte {
			return streamOfFiles(t, map[string][]byte{"README": []byte("not a DB\n")})
		}},
		{"dangling CURRENT", func(t *testing.T) []byte {
			return streamOfFiles(t, map[string][]byte{"CURRENT": []byte("MANIFEST-000042\n")})
		}},
		{"damaged table", func(t *testing.T) []byte { return checkpointStream(t, src, flipTableByte(t)) }},
		{"missing table", func(t *testing.T) []byte {
			return checkpointStream(t, src, func(fs vfs.FS, dir string, names []string) {
				if err := fs.Remove(fs.PathJoin(dir, tableOf(t, names))); err != nil {
					t.Fatal(err)
				}
			})
		}},
		{"no applied index", plainDBStream},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			stream := tc.stream(t)
			fs := vfs.NewMem()
			f := dstFSM(t, fs)
			defer func() { f.Close() }()
			sum, err := f.Checksum()
			if err != nil {
				t.Fatal(err)
			}
			if err := f.Restore(io.NopCloser(bytes.NewReader(stream))); err == nil {
				t.Fatal("Restore accepted a stream that holds no FSM DB")
			} else {
				t.Logf("Restore: %v", err)
			}
			checkOldState(t, f, fs, 0)
			if got, err := f.Checksum(); err != nil || got != sum {
				t.Fatalf("checksum %x (%v) after the failed restore, was %x", got, err, sum)
			}
			if st := f.Stats(); st.Restores != 0 {
				t.Fatalf("stats %+v", st)
			}
			// It keeps applying.
			if r := f.Apply(putCmd(11, "k11", "new11")); r != nil {
				t.Fatalf("Apply after the failed restore: %v", r)
			}
			checkOldState(t, f, fs, 11)
			// And the state survives a reopen.
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			f = openTestFSM(t, fs, "/data/fsm")
			checkOldState(t, f, fs, 11)
			// A sound snapshot still restores.
			if err := f.Restore(io.NopCloser(bytes.NewReader(good))); err != nil {
				t.Fatal(err)
			}
			if got := f.AppliedIndex(); got != 50 {
				t.Fatalf("AppliedIndex after a good restore = %d", got)
			}
			checkSource(t, f, 50)
			checkGet(t, f, "k1", "")
			checkNoLeftovers(t, fs, "/data", "fsm")
			if r := f.Apply(putCmd(51, "s51", "v51")); r != nil {
				t.Fatal(r)
			}
			checkGet(t, f, "s51", "v51")
		})
	}
}
