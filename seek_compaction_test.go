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

// seekChargeFunc is a seekCharger.
type seekChargeFunc func(f *manifest.FileMetadata, level int)

func (fn seekChargeFunc) chargeSeek(f *manifest.FileMetadata, level int) { fn(f, level) }

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
			m.onSeek = seekChargeFunc(func(f *manifest.FileMetadata, level int) {
				charged = append(charged, fmt.Sprintf("table %d at L%d", f.FileNum, level))
			})
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

// TestSeekCompaction: seeks that read two L0 tables queue the newer once
// its allowance (minAllowedSeeks for a small table) is used up, not
// before, and its compaction takes the L0 tables overlapping it and not
// the one beside them, newer versions staying on top; with
// SeekCompactionBytes negative the same seeks charge nothing.
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
			key := func(c byte, i int) []byte { return fmt.Appendf(nil, "%c%05d", c, i) }
			put := func(k []byte, v string) {
				if err := db.Put(k, []byte(v), nil); err != nil {
					t.Fatal(err)
				}
			}
			flush := func() {
				if err := db.Flush(); err != nil {
					t.Fatal(err)
				}
			}
			// L0, oldest first: even k-keys; odd k-keys and every 10th
			// k-key again; a-keys, beside the other two.
			for i := 0; i < 2000; i += 2 {
				put(key('k', i), "old")
			}
			flush()
			for i := 0; i < 2000; i++ {
				if i%2 == 1 || i%10 == 0 {
					put(key('k', i), "new")
				}
			}
			flush()
			for i := range 100 {
				put(key('a', i), "a")
			}
			flush()
			db.mu.Lock()
			tables := slices.Clone(db.vs.current.Levels[0]) // newest first
			db.mu.Unlock()
			if len(tables) != 3 {
				t.Fatalf("L0 has %d tables, want 3", len(tables))
			}
			queued := func() int {
				db.seekMu.Lock()
				defer db.seekMu.Unlock()
				return len(db.seekDue)
			}
			// Each seek to an absent k-key stops in the two k-tables (the
			// a-table holds nothing at or after it). The compaction loop
			// is held off until the last one, so the queue is as the seeks
			// left it.
			db.compactionMu.Lock()
			it, err := db.NewIter(nil)
			if err != nil {
				db.compactionMu.Unlock()
				t.Fatal(err)
			}
			for i := range minAllowedSeeks - 1 {
				it.SeekGE(append(key('k', i), '5'))
			}
			before := queued()
			it.SeekGE(append(key('k', 500), '5'))
			after := queued()
			err = it.Close()
			db.compactionMu.Unlock()
			if err != nil {
				t.Fatal(err)
			}
			if tc.bytes < 0 {
				for _, f := range tables {
					if f.Seeks() != 0 || after != 0 {
						t.Fatalf("seek compactions off: table %d charged %d seeks, %d queued", f.FileNum, f.Seeks(), after)
					}
				}
				return
			}
			if before != 0 || after != 1 {
				t.Fatalf("%d tables queued after %d seeks and %d after one more, want 0 and 1", before, minAllowedSeeks-1, after)
			}
			if got := tables[1].Seeks(); got != minAllowedSeeks {
				t.Fatalf("the newer k-table was charged %d seeks, want %d", got, minAllowedSeeks)
			}
			l0 := func() []*manifest.FileMetadata {
				db.mu.Lock()
				defer db.mu.Unlock()
				return db.vs.current.Levels[0]
			}
			for deadline := time.Now().Add(10 * time.Second); len(l0()) != 1; time.Sleep(time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("L0 still has %d tables after %d seeks", len(l0()), minAllowedSeeks)
				}
			}
			if l0()[0] != tables[0] {
				t.Errorf("L0 kept table %d, want the a-table %d", l0()[0].FileNum, tables[0].FileNum)
			}
			for i := range 2000 {
				want := "old"
				if i%2 == 1 || i%10 == 0 {
					want = "new"
				}
				mustGet(t, db, string(key('k', i)), want)
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
