package bench

import "bytes"

// db_bench's prefix extractor. --prefix_size=N (N > 0) opens db_bench's DB
// with a fixed-length prefix extractor of N bytes, whose prefixes its
// bloom filters then hold; Vigil's opens with vigil.FixedPrefixComparer(N)
// (EngineOptions.PrefixSize). --keys_per_prefix makes keys share prefixes
// (KeyGen.SetPrefixes). db_bench's iterators take the read options
// --total_order_seek, --prefix_same_as_start and (seekrandom's)
// --auto_prefix_mode, which decide how seekrandom seeks (seekMode) and
// whether readseq and readreverse stop at the end of the first key's
// prefix (scanInPrefix). Get needs nothing: Vigil asks the prefix filter
// of a key's tables by itself.

// seekMode is how seekrandom positions its iterator at a key.
type seekMode uint8

const (
	// seekTotal is a seek in total order: without a prefix extractor, or
	// with --total_order_seek, or --auto_prefix_mode where db_bench sets no
	// bound (--reverse_iterator).
	seekTotal seekMode = iota
	// seekPrefix is RocksDB's prefix seek, the default under a prefix
	// extractor: the seek skips tables whose prefix filter excludes the
	// key's prefix; where iteration goes past the prefix is unspecified.
	// It runs as PrefixSeeker.SeekPrefixGE, which finds no key outside the
	// prefix; forward only (backward, see seekInPrefix).
	seekPrefix
	// seekInPrefix limits the iterator to the key's prefix, tables skipped
	// by their prefix filters (PrefixEngine): --prefix_same_as_start, or
	// --auto_prefix_mode, whose forward seeks db_bench bounds at the next
	// prefix. --reverse_iterator's prefix seeks run so too: Vigil has no
	// backward prefix seek on an unbounded iterator, and RocksDB's steps
	// past the prefix are unspecified.
	seekInPrefix
	// seekInPrefixAllTables is seekInPrefix with --total_order_seek: the
	// iterator stops at the prefix's edge but reads every table (kvbench
	// checks the prefix; no filter is asked).
	seekInPrefixAllTables
)

// seekMode returns how seekrandom seeks under the run's read options.
func (c *Config) seekMode() seekMode {
	if c.Engine.PrefixSize <= 0 {
		return seekTotal
	}
	inPrefix := c.PrefixSameAsStart || c.AutoPrefixMode && !c.ReverseIterator
	switch {
	case inPrefix && c.TotalOrderSeek:
		return seekInPrefixAllTables
	case inPrefix:
		return seekInPrefix
	case c.TotalOrderSeek || c.AutoPrefixMode:
		return seekTotal
	case c.ReverseIterator:
		return seekInPrefix
	}
	return seekPrefix
}

// scanInPrefix reports whether readseq and readreverse stop where the
// first key's prefix ends, as RocksDB's iterators do under
// prefix_same_as_start with a prefix extractor.
func (c *Config) scanInPrefix() bool { return c.Engine.PrefixSize > 0 && c.PrefixSameAsStart }

// prefixOf returns k's prefix under a fixed prefix length n: its first n
// bytes, or all of a shorter k (as vigil.FixedPrefixComparer splits).
func prefixOf(k []byte, n int) []byte { return k[:min(n, len(k))] }

// openSeek opens seekrandom's iterator for one seek of k and positions it
// as db_bench's Seek (or, with --reverse_iterator, kvbench's SeekForPrev)
// does under mode; t keeps the scratch buffers.
func (r *Runner) openSeek(e Engine, k []byte, mode seekMode, t *threadState) (Iter, bool, error) {
	n := r.cfg.Engine.PrefixSize
	pe, prefixed := e.(PrefixEngine)
	var it Iter
	var err error
	switch {
	case mode == seekInPrefix && prefixed:
		it, err = pe.NewPrefixIter(prefixOf(k, n))
	case mode == seekInPrefix || mode == seekInPrefixAllTables:
		if it, err = e.NewIter(); err == nil {
			it = t.inPrefix.wrap(it, prefixOf(k, n), n)
		}
	default:
		it, err = e.NewIter()
	}
	if err != nil {
		return nil, false, err
	}
	var valid bool
	switch {
	case r.cfg.ReverseIterator:
		valid, t.target = seekForPrev(it, k, t.target)
	case mode == seekPrefix:
		valid = seekPrefixGE(it, k, n, prefixed)
	default:
		valid = it.SeekGE(k)
	}
	return it, valid, nil
}

// seekPrefixGE is PrefixSeeker.SeekPrefixGE on a PrefixEngine's iterator
// (prefixed), or else SeekGE that finds nothing outside k's prefix: an
// iterator of another engine may have a SeekPrefixGE of its own prefixes.
func seekPrefixGE(it Iter, k []byte, n int, prefixed bool) bool {
	if ps, ok := it.(PrefixSeeker); ok && prefixed {
		return ps.SeekPrefixGE(k)
	}
	return it.SeekGE(k) && bytes.Equal(prefixOf(it.Key(), n), prefixOf(k, n))
}

// inPrefixIter stops an iterator at the edge of one prefix, as RocksDB's
// prefix_same_as_start does: every positioning that lands on a key of
// another prefix leaves it invalid. It reads every table (no filter is
// asked), where PrefixEngine's iterators skip tables by their filters.
type inPrefixIter struct {
	Iter
	prefix []byte
	n      int
	valid  bool
}

// wrap makes p an in-prefix view of it for prefix (copied), valid if it
// is positioned in the prefix, and returns p.
func (p *inPrefixIter) wrap(it Iter, prefix []byte, n int) *inPrefixIter {
	p.Iter, p.prefix, p.n = it, append(p.prefix[:0], prefix...), n
	p.check(it.Valid())
	return p
}

func (p *inPrefixIter) check(ok bool) bool {
	p.valid = ok && bytes.Equal(prefixOf(p.Iter.Key(), p.n), p.prefix)
	return p.valid
}

func (p *inPrefixIter) First() bool            { return p.check(p.Iter.First()) }
func (p *inPrefixIter) Last() bool             { return p.check(p.Iter.Last()) }
func (p *inPrefixIter) Next() bool             { return p.valid && p.check(p.Iter.Next()) }
func (p *inPrefixIter) Prev() bool             { return p.valid && p.check(p.Iter.Prev()) }
func (p *inPrefixIter) SeekGE(key []byte) bool { return p.check(p.Iter.SeekGE(key)) }
func (p *inPrefixIter) Valid() bool            { return p.valid }

// SeekLT implements ReverseSeeker, by the wrapped iterator's SeekLT or,
// without one, SeekGE and a step back.
func (p *inPrefixIter) SeekLT(key []byte) bool {
	if rs, ok := p.Iter.(ReverseSeeker); ok {
		return p.check(rs.SeekLT(key))
	}
	if !p.Iter.SeekGE(key) {
		return p.check(p.Iter.Last())
	}
	return p.check(p.Iter.Prev())
}

// newKeyGen returns a thread's key generator: the run's shape, laid out
// for --prefix_size and --keys_per_prefix.
func (r *Runner) newKeyGen() *KeyGen {
	g := NewKeyGen(r.cfg.KeyShape, r.cfg.KeySize)
	g.SetPrefixes(r.cfg.Engine.PrefixSize, r.cfg.KeysPerPrefix, r.cfg.Num)
	return g
}

// seekMissingPrefix reports whether seekrandom marks its keys' byte 8 for
// --seek_missing_prefix: db_bench's keys with a prefix of more than 8
// bytes only (the CLI refuses a shorter prefix, as db_bench does, and
// reports the other shapes).
func (r *Runner) seekMissingPrefix() bool {
	return r.cfg.SeekMissingPrefix && r.cfg.KeyShape == KeyDBBench && r.cfg.Engine.PrefixSize > 8 && r.cfg.KeySize > 8
}
