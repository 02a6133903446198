package rangedel

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
	"github.com/vigildb/vigil/internal/base"
	"github.com/vigildb/vigil/internal/testcmp"
)

// parseTombstones reads "start-end#seq" tokens, whitespace-separated.
func parseTombstones(t testing.TB, s string) []Tombstone {
	var ts []Tombstone
	for _, f := range strings.Fields(s) {
		se, seq, ok := strings.Cut(f, "#")
		start, end, ok2 := strings.Cut(se, "-")
		n, err := strconv.ParseUint(seq, 10, 64)
		if !ok || !ok2 || err != nil {
			t.Fatalf("bad tombstone %q (want start-end#seq)", f)
		}
		ts = append(ts, Tombstone{Start: []byte(start), End: []byte(end), Seq: n})
	}
	return ts
}

func fmtTombstones(ts []Tombstone) string {
	var b strings.Builder
	for _, t := range ts {
		fmt.Fprintf(&b, "[%s, %s)#%d\n", t.Start, t.End, t.Seq)
	}
	if b.Len() == 0 {
		return "(none)\n"
	}
	return b.String()
}

// stripeOf maps a seqnum to its snapshot stripe, as a compaction does.
func stripeOf(snaps []uint64) func(uint64) int {
	return func(seq uint64) int { return sort.Search(len(snaps), func(i int) bool { return seq <= snaps[i] }) }
}

func scanUints(t testing.TB, d *datadriven.TestData, key string) []uint64 {
	var out []uint64
	if arg, ok := d.Arg(key); ok {
		for _, v := range arg.Vals {
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				t.Fatalf("%s: %v", key, err)
			}
			out = append(out, n)
		}
	}
	return out
}

// TestRangeDel runs testdata/*: fragmenting, coverage at snapshots, the
// prebuilt index, iterator sets over several sources, and a compaction's
// stacks, elision and clipping.
//
//	define [cmp=reverse|versioned]
//	                  tombstones "start-end#seq", one source per line, in
//	                  the comparer's order (default: bytewise)
//	fragment snap=N   the fragments visible at snap
//	covers snap=N     for each "key#seq" input: deleted or live, three ways
//	                  (fragments, the plain pass, the index), which must agree
//	set snap=N        the iterator view over the sources; "key#seq" lookups
//	stacks            a compaction's stacks
//	elide snaps=a,b bottom=true|false
//	                  the tombstones a compaction keeps, and how many it drops
//	clip splits=k1,k2 kept tombstones cut for outputs split at those keys
func TestRangeDel(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		var sources [][]Tombstone
		all := func() []Tombstone {
			var out []Tombstone
			for _, s := range sources {
				out = append(out, s...)
			}
			return out
		}
		var kept []Tombstone
		var c *base.Comparer
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			snap := uint64(1 << 56)
			if d.HasArg("snap") {
				d.ScanArgs(t, "snap", &snap)
			}
			switch d.Cmd {
			case "define":
				sources, c = nil, nil
				if d.HasArg("cmp") {
					var name string
					d.ScanArgs(t, "cmp", &name)
					c = map[string]*base.Comparer{"reverse": testcmp.Reverse, "versioned": testcmp.Versioned}[name].Resolve()
				}
				for _, line := range strings.Split(strings.TrimSpace(d.Input), "\n") {
					if line = strings.TrimSpace(line); line != "" {
						sources = append(sources, parseTombstones(t, line))
					}
				}
				return ""
			case "fragment":
				f := Build(c, all(), snap)
				var b strings.Builder
				for i := 0; i < f.Len(); i++ {
					s, e, seq := f.At(i)
					fmt.Fprintf(&b, "[%s, %s)#%d\n", s, e, seq)
				}
				if b.Len() == 0 {
					return "(none)\n"
				}
				return b.String()
			case "covers", "set":
				ts := all()
				f := Build(c, ts, snap)
				x := NewIndex(c, ts)
				srcs := Sources{Cmp: c}
				for _, s := range sources {
					idx := NewIndex(c, s)
					srcs.Add(s, &idx, snap)
				}
				set := srcs.Set(snap)
				var b strings.Builder
				for _, q := range strings.Fields(d.Input) {
					k, seqStr, _ := strings.Cut(q, "#")
					seq, err := strconv.ParseUint(seqStr, 10, 64)
					if err != nil {
						t.Fatalf("bad query %q", q)
					}
					byFrags := f.Covers([]byte(k), seq)
					byPass := seq < RaiseCover(c, ts, []byte(k), snap, 0)
					byIndex := seq < x.Raise(c, ts, []byte(k), snap, 0)
					bySet := set.Covers([]byte(k), seq)
					if byFrags != byPass || byPass != byIndex || byIndex != bySet {
						t.Fatalf("%s at snap %d: fragments %v, plain pass %v, index %v, set %v disagree", q, snap, byFrags, byPass, byIndex, bySet)
					}
					state := "live"
					if byFrags {
						state = "deleted"
					}
					fmt.Fprintf(&b, "%s: %s\n", q, state)
				}
				if d.Cmd == "set" {
					fmt.Fprintf(&b, "parts: %d\n", len(set.parts))
				}
				return b.String()
			case "stacks":
				var b strings.Builder
				for _, s := range Stacks(c, all()) {
					fmt.Fprintf(&b, "[%s, %s) %v\n", s.Start, s.End, s.Seqs)
				}
				return b.String()
			case "elide":
				snaps := scanUints(t, d, "snaps")
				bottom := false
				if d.HasArg("bottom") {
					d.ScanArgs(t, "bottom", &bottom)
				}
				stacks := Stacks(c, all())
				var dropped uint64
				kept, dropped = Elide(stacks, stripeOf(snaps), func(_, _ []byte) bool { return bottom })
				var b strings.Builder
				b.WriteString(fmtTombstones(kept))
				fmt.Fprintf(&b, "dropped: %d\n", dropped)
				for _, q := range strings.Fields(d.Input) {
					k, seqStr, _ := strings.Cut(q, "#")
					seq, _ := strconv.ParseUint(seqStr, 10, 64)
					fmt.Fprintf(&b, "point %s dropped: %v\n", q, CoveredInStripe(c, stacks, []byte(k), seq, stripeOf(snaps)))
				}
				return b.String()
			case "clip":
				var splits [][]byte
				if arg, ok := d.Arg("splits"); ok {
					for _, v := range arg.Vals {
						splits = append(splits, []byte(v))
					}
				}
				cl := NewClipper(c, kept)
				var b strings.Builder
				var start []byte
				for i := 0; i <= len(splits); i++ {
					var end []byte
					if i < len(splits) {
						end = splits[i]
					}
					fmt.Fprintf(&b, "output %d [%s, %s):\n", i, orInf(start, "-inf"), orInf(end, "+inf"))
					for _, t := range cl.Clip(nil, start, end) {
						fmt.Fprintf(&b, "  [%s, %s)#%d\n", t.Start, t.End, t.Seq)
					}
					start = end
				}
				fmt.Fprintf(&b, "pending: %v\n", cl.Pending())
				return b.String()
			}
			t.Fatalf("unknown command %q", d.Cmd)
			return ""
		})
	})
}

func orInf(b []byte, inf string) string {
	if b == nil {
		return inf
	}
	return string(b)
}

// A Cache serves reads from the plain pass until log2(n) of them have found
// it stale, then rebuilds once; its bounds are copies of the source's.
func TestCache(t *testing.T) {
	var cache Cache
	src := []Tombstone{{Start: []byte("a"), End: []byte("c"), Seq: 5}}
	loads := 0
	load := sourceFunc(func() ([]Tombstone, error) {
		loads++
		out := make([]Tombstone, len(src))
		copy(out, src)
		return out, nil
	})
	if _, _, ok, _ := cache.Get(nil, 0, load); ok || loads != 0 {
		t.Fatal("a source without tombstones has a cache")
	}
	// n=1: bits.Len64(1) = 1 stale read first, then a rebuild.
	if _, _, ok, _ := cache.Get(nil, 1, load); ok {
		t.Fatal("first stale read was served from the cache")
	}
	all, idx, ok, _ := cache.Get(nil, 1, load)
	if !ok || loads != 1 || len(all) != 1 || idx.Frags.CoverSeq([]byte("b")) != 5 {
		t.Fatalf("rebuild: ok=%v loads=%d all=%v", ok, loads, all)
	}
	src[0].Start[0] = 'z' // the source's bytes change (a bit flip, say)
	if all, _, _, _ := cache.Get(nil, 1, load); string(all[0].Start) != "a" {
		t.Fatal("the cache aliases the source's bytes")
	}
	// The source grows to 4: three stale reads, then a rebuild.
	src = append(src, Tombstone{Start: []byte("d"), End: []byte("e"), Seq: 6}, Tombstone{Start: []byte("f"), End: []byte("g"), Seq: 7}, Tombstone{Start: []byte("h"), End: []byte("i"), Seq: 8})
	for i := 0; i < 3; i++ {
		if _, _, ok, _ := cache.Get(nil, 4, load); ok {
			t.Fatalf("stale read %d served from the cache", i)
		}
	}
	if all, _, ok, _ := cache.Get(nil, 4, load); !ok || len(all) != 4 || loads != 2 {
		t.Fatalf("second rebuild: ok=%v len=%d loads=%d", ok, len(all), loads)
	}
}

// sourceFunc adapts a function to Source.
type sourceFunc func() ([]Tombstone, error)

func (f sourceFunc) RangeDels(uint64) ([]Tombstone, error) { return f() }
