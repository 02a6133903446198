package vigil

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/cockroachdb/pebble/vfs"
	"github.com/vigildb/vigil/internal/base"
	"github.com/vigildb/vigil/internal/manifest"
)

// tableTestIter is a testIter standing for a table at a level (see
// mergingIter.chargeSeek).
type tableTestIter struct {
	*testIter
	meta  *manifest.FileMetadata
	level int
}

func (t *tableTestIter) positionedTable() (*manifest.FileMetadata, int) { return t.meta, t.level }

// mayHoldUserKey and mayHoldPrefix are a filter without false positives.
func (t *tableTestIter) mayHoldUserKey(k []byte) bool {
	return slices.ContainsFunc(t.keys, func(ik base.InternalKey) bool { return string(ik.UserKey) == string(k) })
}

func (t *tableTestIter) mayHoldPrefix(prefix, _ []byte) bool {
	return slices.ContainsFunc(t.keys, func(ik base.InternalKey) bool { return strings.HasPrefix(string(ik.UserKey), string(prefix)) })
}

// TestSeekCharge runs testdata/seek_charge: sources defined one per line,
// "mem:" (no table) or "L<n>:" (a table at level n, numbered by its line,
// with an exact filter), newest first; each seek prints its entry and the
// table it charged.
func TestSeekCharge(t *testing.T) {
	var children []base.InternalIterator
	datadriven.RunTest(t, "testdata/seek_charge", func(t *testing.T, d *datadriven.TestData) string {
		switch d.Cmd {
		case "define":
			children = nil
			for i, line := range strings.Split(strings.TrimSpace(d.Input), "\n") {
				src, entries, _ := strings.Cut(line, ":")
				it := parseEntries(t, entries)
				if src == "mem" {
					children = append(children, it)
					continue
				}
				var level int
				if _, err := fmt.Sscanf(src, "L%d", &level); err != nil {
					t.Fatalf("bad source %q", src)
				}
				children = append(children, &tableTestIter{it, &manifest.FileMetadata{FileNum: uint64(i + 1)}, level})
			}
			return ""
		case "seek":
			m := newMergingIter(base.DefaultComparer, children)
			var charged []string
			m.onSeek = func(f *manifest.FileMetadata, level int) {
				charged = append(charged, fmt.Sprintf("table %d at L%d", f.FileNum, level))
			}
			var b strings.Builder
			for _, line := range strings.Split(strings.TrimSpace(d.Input), "\n") {
				op, key, _ := strings.Cut(line, " ")
				charged = charged[:0]
				var ok bool
				switch op {
				case "seek-ge":
					ok = m.SeekGE([]byte(key))
				case "seek-lt":
					ok = m.SeekLT([]byte(key))
				case "seek-prefix-ge":
					ok = m.SeekPrefixGE([]byte(key), []byte(key))
				default:
					t.Fatalf("unknown op %q", line)
				}
				fmt.Fprintf(&b, "%s: %s", line, fmtEntry(m, ok))
				if len(charged) > 0 {
					fmt.Fprintf(&b, "; charged %s", strings.Join(charged, ", "))
				}
				b.WriteString("\n")
			}
			return b.String()
		}
		t.Fatalf("unknown command %q", d.Cmd)
		return ""
	})
}

// TestSeekCompaction: seeks that read two L0 tables compact them into L1
// once the newer one's allowance is used up (minAllowedSeeks for a small
// table), the keys all still there; with SeekCompactionBytes negative the
// same seeks queue nothing.
func TestSeekCompaction(t *testing.T) {
	for _, tc := range []struct {
		name  string
		bytes int64
	}{{"default", 0}, {"off", -1}} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var reasons []string
			db := openMem(t, vfs.NewMem(), &Options{
				L0CompactionTrigger: 8, SeekCompactionBytes: tc.bytes,
				EventListener: &EventListener{CompactionEnd: func(ci CompactionInfo) {
					mu.Lock()
					reasons = append(reasons, ci.Reason)
					mu.Unlock()
				}},
			})
			defer db.Close()
			key := func(i int) []byte { return fmt.Appendf(nil, "k%05d", i) }
			// Two L0 tables over one range: even keys, then odd ones.
			for r := range 2 {
				for i := r; i < 2000; i += 2 {
					if err := db.Put(key(i), key(i), nil); err != nil {
						t.Fatal(err)
					}
				}
				if err := db.Flush(); err != nil {
					t.Fatal(err)
				}
			}
			l0 := func() int {
				db.mu.Lock()
				defer db.mu.Unlock()
				return len(db.vs.current.Levels[0])
			}
			if n := l0(); n != 2 {
				t.Fatalf("L0 has %d tables, want 2", n)
			}
			// Each seek to an absent key stops in both tables.
			it, err := db.NewIter(nil)
			if err != nil {
				t.Fatal(err)
			}
			for i := range minAllowedSeeks - 1 {
				it.SeekGE(append(key(i), '5'))
			}
			db.mu.Lock()
			db.seekMu.Lock()
			queued := len(db.seekDue)
			db.seekMu.Unlock()
			db.mu.Unlock()
			if queued != 0 {
				t.Fatalf("%d tables queued after %d seeks, want none before the allowance", queued, minAllowedSeeks-1)
			}
			it.SeekLT(append(key(500), '5'))
			if err := it.Close(); err != nil {
				t.Fatal(err)
			}
			if tc.bytes < 0 {
				db.mu.Lock()
				c := db.pickSeekCompactionLocked(db.vs.current)
				db.mu.Unlock()
				if c != nil || l0() != 2 {
					t.Fatalf("seek compactions off: picked %v, L0 has %d tables", c, l0())
				}
				return
			}
			for deadline := time.Now().Add(10 * time.Second); l0() != 0; time.Sleep(time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("L0 still has %d tables after %d seeks", l0(), minAllowedSeeks)
				}
			}
			for i := range 2000 {
				mustGet(t, db, string(key(i)), string(key(i)))
			}
			if m := db.Metrics(); m.Compact.Seeks != 1 {
				t.Errorf("Metrics.Compact.Seeks = %d, want 1", m.Compact.Seeks)
			}
			mu.Lock()
			defer mu.Unlock()
			if !slices.Contains(reasons, reasonSeeks) {
				t.Errorf("compaction reasons %q, want one %q", reasons, reasonSeeks)
			}
		})
	}
}
