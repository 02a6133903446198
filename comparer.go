package vigil

import (
	"bytes"
	"fmt"

	"github.com/vigildb/vigil/internal/base"
)

// Comparer defines the order of keys (see its fields). Every part of the
// DB that orders keys uses Options.Comparer: the memtable, tables and
// their index keys, range deletions, compactions, ingestion checks,
// iterator bounds and range checksums. Its Name is recorded in the
// MANIFEST, the OPTIONS file and every table; opening a DB with another
// comparer is ErrInvalidArgument naming both.
//
// A Comparer with Split gives keys a prefix: tables' bloom filters then
// hold prefixes, and Get, an iterator with IterOptions.Prefix and
// Iterator.SeekPrefixGE skip tables whose filter excludes the prefix.
type Comparer = base.Comparer

// DefaultComparer orders keys bytewise (bytes.Compare), with no prefixes.
// It is what a nil Options.Comparer means, and costs nothing extra: the
// engine compares bytewise keys inline.
var DefaultComparer = base.DefaultComparer

// FixedPrefixComparer returns a bytewise comparer whose keys' prefixes are
// their first n bytes (a shorter key is all prefix), as RocksDB's
// NewFixedPrefixTransform(n) with a bytewise comparator: tables' bloom
// filters hold prefixes, and prefix iteration skips tables without the
// prefix. Its name, "vigil.FixedPrefix(n)", includes n, so a DB written
// with one prefix length does not open with another.
func FixedPrefixComparer(n int) *Comparer {
	if n < 1 {
		panic(fmt.Sprintf("vigil: FixedPrefixComparer(%d): the prefix needs at least one byte", n))
	}
	return &Comparer{
		Compare:        bytes.Compare,
		Equal:          bytes.Equal,
		AbbreviatedKey: base.BytewiseAbbreviatedKey,
		Separator:      base.BytewiseSeparator,
		Successor:      base.BytewiseSuccessor,
		Split:          func(k []byte) int { return min(n, len(k)) },
		Name:           fmt.Sprintf("vigil.FixedPrefix(%d)", n),
	}
}

// validateComparer is Validate's part for Comparer.
func (o *Options) validateComparer(add func(format string, args ...any)) {
	c := o.Comparer
	if c == nil {
		return
	}
	if p := c.Check(); p != "" {
		add("%s", p)
		return
	}
	if c.Name == base.BytewiseComparerName && (c.Split != nil || !c.Resolve().IsBytewise()) {
		add("Comparer named %q is not DefaultComparer: that name is the default order's, and a DB recording it opens without a Comparer; give yours a name of its own", c.Name)
	}
}
