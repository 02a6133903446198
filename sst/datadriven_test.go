package sst

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
	"github.com/vigildb/vigil/checksum"
	"github.com/vigildb/vigil/internal/base"
	"github.com/vigildb/vigil/internal/testcmp"
)

// TestDataDriven runs testdata/comparer: tables written and read under the
// test comparers, shown block by block with their index separators. The
// commands:
//
//	build cmp=<default|reverse|versioned> [block-size=N] [bloom=N]
//	  one entry a line, "key#seq,SET=value", "key#seq,DEL" or
//	  "rangedel start-end#seq"; prints the data blocks' first and last
//	  keys and separators, and the comparer properties
//	open cmp=<...>        opens the last table under a comparer
//	get key=K [snap=N]    Get
//	iter [lower=K] [upper=K] [prefix=P]
//	  one operation a line: first, last, next, prev, seek-ge K, seek-lt K
//	may-contain           one key a line: MayContain
//	may-contain-prefix    one prefix a line: MayContainPrefix
//	verify / salvage      Verify, Salvage
//
// Under versioned, "name@N" is testcmp.VersionedKey(name, N) and a key
// without "@" is a bare prefix.
func TestDataDriven(t *testing.T) {
	var data []byte
	var r *Reader
	defer func() {
		if r != nil {
			r.Close()
		}
	}()
	datadriven.RunTest(t, "testdata/comparer", func(t *testing.T, d *datadriven.TestData) string {
		// The default comparer's name shows as "default": the file does
		// not depend on it.
		return strings.ReplaceAll(ddRun(t, d, &data, &r), strconv.Quote(base.BytewiseComparerName), `"default"`)
	})
}

// ddRun runs one command of TestDataDriven on the last table built (*data,
// open in *r).
func ddRun(t *testing.T, d *datadriven.TestData, data *[]byte, rp **Reader) string {
	c, r := ddComparer(t, d), *rp
	switch d.Cmd {
	case "build":
		if r != nil {
			r.Close()
			*rp = nil
		}
		o := testWriterOptions(checksum.XXH3, NoCompression, ddInt(t, d, "block-size", 4096))
		o.BlockRestartInterval, o.BloomBitsPerKey, o.Comparer = 4, ddInt(t, d, "bloom", 0), c
		var err error
		if *data, _, err = buildBytes(o, ddSpec(t, c, d.Input)); err != nil {
			return err.Error()
		}
		if *rp, err = openBytes(*data, ReaderOptions{Comparer: c}); err != nil {
			return err.Error()
		}
		return ddLayout(t, *rp)
	case "open":
		or, err := openBytes(*data, ReaderOptions{Comparer: c})
		if err != nil {
			return err.Error()
		}
		or.Close()
		return "ok"
	case "get":
		k := ddKey(r.cmp, ddArg(t, d, "key"))
		snap := uint64(base.SeqNumMax)
		if d.HasArg("snap") {
			snap = uint64(ddInt(t, d, "snap", 0))
		}
		v, seq, kind, found, err := r.Get(k, snap)
		switch {
		case err != nil:
			return err.Error()
		case !found:
			return "not found"
		}
		return fmt.Sprintf("%s#%d,%s=%s", ddFmt(r.cmp, k), seq, kind, v)
	case "iter":
		return ddIter(t, d, r)
	case "may-contain", "may-contain-prefix":
		var b strings.Builder
		for _, line := range strings.Fields(d.Input) {
			k := ddKey(r.cmp, line)
			may := r.MayContain(k)
			if d.Cmd == "may-contain-prefix" {
				may = r.MayContainPrefix(k)
			}
			fmt.Fprintf(&b, "%s: %v\n", line, may)
		}
		return b.String()
	case "verify":
		if err := r.Verify(); err != nil {
			return err.Error()
		}
		return "ok"
	case "salvage":
		got, res, err := salvageBytes(t, *data, ReaderOptions{Comparer: r.cmp})
		if err != nil {
			return err.Error()
		}
		var b strings.Builder
		for _, e := range got {
			fmt.Fprintf(&b, "%s\n", ddFmtKey(r.cmp, e.key))
		}
		fmt.Fprintf(&b, "%d lost, %d tombstones\n", len(res.Lost), len(res.RangeDels))
		return b.String()
	}
	t.Fatalf("unknown command %q", d.Cmd)
	return ""
}

func ddArg(t *testing.T, d *datadriven.TestData, name string) string {
	for _, a := range d.CmdArgs {
		if a.Key == name && len(a.Vals) == 1 {
			return a.Vals[0]
		}
	}
	t.Fatalf("%s: missing %s=", d.Pos, name)
	return ""
}

func ddInt(t *testing.T, d *datadriven.TestData, name string, def int) int {
	if !d.HasArg(name) {
		return def
	}
	n, err := strconv.Atoi(ddArg(t, d, name))
	if err != nil {
		t.Fatalf("%s: %s: %v", d.Pos, name, err)
	}
	return n
}

// ddComparer is the cmp= argument's comparer (the default without one).
func ddComparer(t *testing.T, d *datadriven.TestData) *base.Comparer {
	if !d.HasArg("cmp") {
		return base.DefaultComparer
	}
	switch s := ddArg(t, d, "cmp"); s {
	case "default":
		return base.DefaultComparer
	case "reverse":
		return testcmp.Reverse.Resolve()
	case "versioned":
		return testcmp.Versioned.Resolve()
	default:
		t.Fatalf("%s: unknown comparer %q", d.Pos, s)
	}
	return nil
}

// ddKey parses a user key: "name@N" under a comparer with a Split is a
// versioned key.
func ddKey(c *base.Comparer, s string) []byte {
	if name, v, ok := strings.Cut(s, "@"); ok && c.Split != nil {
		n, _ := strconv.ParseUint(v, 10, 64)
		return testcmp.VersionedKey([]byte(name), n)
	}
	return []byte(s)
}

// ddFmt renders a user key as ddKey reads it.
func ddFmt(c *base.Comparer, k []byte) string {
	if c.Split != nil && len(k) >= testcmp.VersionLen {
		n := len(k) - testcmp.VersionLen
		v := binary.BigEndian.Uint64(k[n:])
		if v == ^uint64(0) {
			return string(k[:n]) + "@max"
		}
		return fmt.Sprintf("%s@%d", k[:n], v)
	}
	return string(k)
}

func ddFmtKey(c *base.Comparer, k base.InternalKey) string {
	if k.SeqNum() == base.SeqNumMax {
		return fmt.Sprintf("%s#max,%s", ddFmt(c, k.UserKey), k.Kind())
	}
	return fmt.Sprintf("%s#%d,%s", ddFmt(c, k.UserKey), k.SeqNum(), k.Kind())
}

// ddSpec parses build's input.
func ddSpec(t *testing.T, c *base.Comparer, input string) tableSpec {
	var s tableSpec
	for _, line := range strings.Split(strings.TrimSpace(input), "\n") {
		if rest, ok := strings.CutPrefix(line, "rangedel "); ok {
			keys, seq, _ := strings.Cut(rest, "#")
			start, end, _ := strings.Cut(keys, "-")
			n, _ := strconv.ParseUint(seq, 10, 64)
			s.tombs = append(s.tombs, base.RangeTombstone{Start: ddKey(c, start), End: ddKey(c, end), Seq: n})
			continue
		}
		key, value, _ := strings.Cut(line, "=")
		i := strings.LastIndex(key, "#")
		seq, kind, ok := strings.Cut(key[i+1:], ",")
		n, err := strconv.ParseUint(seq, 10, 64)
		if i < 0 || !ok || err != nil {
			t.Fatalf("bad entry %q", line)
		}
		k := base.KindSet
		if kind == "DEL" {
			k = base.KindDelete
		}
		s.points = append(s.points, kv{base.MakeInternalKey(ddKey(c, key[:i]), n, k), []byte(value)})
	}
	return s
}

// ddLayout renders each data block's first and last keys and separator,
// and the comparer properties.
func ddLayout(t *testing.T, r *Reader) string {
	var b strings.Builder
	for i := 0; i < r.index.len(); i++ {
		blk, err := r.readBlock(r.index.handle(i), BlockKindData, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		var it blockIter
		if err := it.initData(blk, r.cmp); err != nil || !it.first() {
			t.Fatalf("block %d: %v", i, err)
		}
		first, _ := base.DecodeInternalKey(bytes.Clone(it.key))
		it.last()
		last, _ := base.DecodeInternalKey(it.key)
		sep, _ := base.DecodeInternalKey(r.index.sep(i))
		fmt.Fprintf(&b, "block %d: %s .. %s | sep %s\n", i, ddFmtKey(r.cmp, first), ddFmtKey(r.cmp, last), ddFmtKey(r.cmp, sep))
	}
	p := r.Properties()
	if !p.empty() {
		fmt.Fprintf(&b, "bounds: %s .. %s\n", ddFmtKey(r.cmp, p.SmallestKey), ddFmtKey(r.cmp, p.LargestKey))
	}
	fmt.Fprintf(&b, "comparer: %q\nprefix filter: %v\n", p.ComparerName, p.PrefixFilter)
	return b.String()
}

// ddIter runs iter's operations.
func ddIter(t *testing.T, d *datadriven.TestData, r *Reader) string {
	var lower, upper []byte
	var o ReadOptions
	if d.HasArg("lower") {
		lower = ddKey(r.cmp, ddArg(t, d, "lower"))
	}
	if d.HasArg("upper") {
		upper = ddKey(r.cmp, ddArg(t, d, "upper"))
	}
	if d.HasArg("prefix") {
		o.Prefix = []byte(ddArg(t, d, "prefix"))
	}
	it := r.NewIterWithOptions(lower, upper, o)
	defer it.Close()
	var b strings.Builder
	for _, line := range strings.Split(strings.TrimSpace(d.Input), "\n") {
		op, arg, _ := strings.Cut(line, " ")
		var ok bool
		switch op {
		case "first":
			ok = it.First()
		case "last":
			ok = it.Last()
		case "next":
			ok = it.Next()
		case "prev":
			ok = it.Prev()
		case "seek-ge":
			ok = it.SeekGE(ddKey(r.cmp, arg))
		case "seek-lt":
			ok = it.SeekLT(ddKey(r.cmp, arg))
		default:
			t.Fatalf("%s: unknown operation %q", d.Pos, op)
		}
		switch {
		case it.Error() != nil:
			fmt.Fprintf(&b, "%s: error %v\n", line, it.Error())
		case ok:
			fmt.Fprintf(&b, "%s: %s=%s\n", line, ddFmtKey(r.cmp, it.Key()), it.Value())
		default:
			fmt.Fprintf(&b, "%s: .\n", line)
		}
	}
	return b.String()
}
