package vigil

import (
	"bytes"
	"fmt"
	"slices"
	"strings"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/vigildb/vigil/internal/base"
	"github.com/vigildb/vigil/sst"
)

// ExternalWriterOptions configure an ExternalWriter. The zero value (and a
// nil pointer) means the defaults, the same as Options': XXH3 checksums,
// Snappy, 4 KiB blocks, restart interval 16, a 10-bit bloom filter.
type ExternalWriterOptions struct {
	// ChecksumType protects the table's blocks; the DB that ingests it keeps
	// the table's own type.
	ChecksumType ChecksumType
	// Compression of the table's blocks.
	Compression Compression
	// ZstdLevel is zstd's level with ZstdCompression (see Options).
	ZstdLevel int
	// BlockSize is the target uncompressed size of data blocks.
	BlockSize int
	// BlockRestartInterval is the number of keys between restart points.
	BlockRestartInterval int
	// BloomBitsPerKey sizes the bloom filter; negative disables it.
	BloomBitsPerKey int
	// Comparer orders the keys; it must be the Options.Comparer of the DB
	// that ingests the table (Ingest refuses a table of another). nil:
	// DefaultComparer.
	Comparer *Comparer
}

// ExternalWriter builds a sorted table outside any DB, for DB.Ingest and
// DB.IngestAndExcise: bulk loads built offline or on another machine, and
// replica snapshots. The file is Vigil's normal table format, marked
// external in its properties: every entry is stored at sequence number 0,
// and the DB that ingests it gives them all one new sequence number
// without rewriting the file.
//
// Point keys (Set, Delete) must be added in strictly increasing key order
// (ExternalWriterOptions.Comparer's, bytewise by default; no key twice); a
// key out of order is refused with ErrInvalidArgument and nothing is added (the writer stays usable). Range
// deletions may be added in any order and may overlap: Close merges them
// into disjoint ranges. A range deletion in the table deletes what the DB
// held before the ingestion, not the table's own point keys (they share
// the ingestion's sequence number, and a range deletion only covers older
// entries), so a table may delete a range and set keys inside it.
//
// Concurrency: an ExternalWriter is used by one goroutine.
type ExternalWriter struct {
	fs   vfs.FS
	path string
	cmp  *base.Comparer
	w    *sst.Writer
	// last is the last point key added; havePoint says whether there was one.
	last      []byte
	havePoint bool
	// tombs are the range deletions, written (merged) at Close.
	tombs  []externalTomb
	err    error
	closed bool
}

type externalTomb struct{ start, end []byte }

// NewExternalWriter creates the table file path on fs (it must not be
// open elsewhere; an existing file is truncated). A nil opts means the
// defaults.
func NewExternalWriter(fs vfs.FS, path string, opts *ExternalWriterOptions) (*ExternalWriter, error) {
	if fs == nil {
		fs = vfs.Default
	}
	var o ExternalWriterOptions
	if opts != nil {
		o = *opts
	}
	wo, err := o.sstOptions()
	if err != nil {
		return nil, err
	}
	f, err := fs.Create(path)
	if err != nil {
		return nil, fmt.Errorf("vigil: creating external table %s: %w", path, err)
	}
	return &ExternalWriter{fs: fs, path: path, cmp: wo.Comparer, w: sst.NewWriter(f, wo)}, nil
}

// sstOptions applies the DB's defaults to o, validates it with the DB's
// rules for table options, and converts it.
func (o ExternalWriterOptions) sstOptions() (sst.WriterOptions, error) {
	tableDefaults(&o.BlockSize, &o.BlockRestartInterval, &o.BloomBitsPerKey)
	var problems []string
	add := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	if !o.ChecksumType.Valid() {
		add("ChecksumType = %v: unknown; valid: %s", o.ChecksumType, validChecksumTypes)
	}
	validateTableOptions(add, o.Compression, o.ZstdLevel, o.BlockSize, o.BlockRestartInterval, o.BloomBitsPerKey)
	if p := o.Comparer.Check(); p != "" {
		add("%s", p)
	}
	if len(problems) > 0 {
		return sst.WriterOptions{}, base.InvalidArgumentErrorf("vigil: ExternalWriterOptions: %s", strings.Join(problems, "; "))
	}
	return sst.WriterOptions{
		ChecksumType:         o.ChecksumType.Resolve(),
		Compression:          o.Compression.Resolve(),
		ZstdLevel:            o.ZstdLevel,
		BlockSize:            o.BlockSize,
		BlockRestartInterval: o.BlockRestartInterval,
		BloomBitsPerKey:      max(o.BloomBitsPerKey, 0),
		External:             true,
		Comparer:             o.Comparer.Resolve(),
		// An identity of the writer's own: the DB that ingests the
		// table records it, so that another table put in its place
		// fails to open.
		Identity: sst.Identity{Session: base.NewRandomID()},
	}, nil
}

func (w *ExternalWriter) check() error {
	if w.closed {
		return base.InvalidArgumentErrorf("vigil: external table %s: writer closed", w.path)
	}
	return w.err
}

// add adds one point entry after checking the key order.
func (w *ExternalWriter) add(key, value []byte, kind base.Kind) error {
	if err := w.check(); err != nil {
		return err
	}
	if w.havePoint && w.cmp.Cmp(key, w.last) <= 0 {
		return base.InvalidArgumentErrorf("vigil: external table %s: key %s added after %s (keys must strictly increase)",
			w.path, base.HexKey(key), base.HexKey(w.last))
	}
	if err := w.w.Add(base.MakeInternalKey(key, 0, kind), value); err != nil {
		w.err = fmt.Errorf("vigil: external table %s: %w", w.path, err)
		return w.err
	}
	w.last = append(w.last[:0], key...)
	w.havePoint = true
	return nil
}

// Set adds key = value. Keys must strictly increase. Both are copied.
func (w *ExternalWriter) Set(key, value []byte) error { return w.add(key, value, base.KindSet) }

// Delete adds a deletion of key: after the ingestion the key is absent,
// whatever the DB held. Keys must strictly increase.
func (w *ExternalWriter) Delete(key []byte) error { return w.add(key, nil, base.KindDelete) }

// DeleteRange adds a deletion of [start, end), in any order relative to
// other calls. An empty range (start == end) is a no-op, an inverted one
// ErrInvalidArgument, as for Batch.DeleteRange. Both are copied.
func (w *ExternalWriter) DeleteRange(start, end []byte) error {
	if err := w.check(); err != nil {
		return err
	}
	switch c := w.cmp.Cmp(start, end); {
	case c > 0:
		return base.InvalidArgumentErrorf("vigil: external table %s: DeleteRange start %s > end %s", w.path, base.HexKey(start), base.HexKey(end))
	case c == 0:
		return nil
	}
	w.tombs = append(w.tombs, externalTomb{bytes.Clone(start), bytes.Clone(end)})
	return nil
}

// Close writes the range deletions (sorted and merged into disjoint
// ranges), finishes the table and syncs the file. The file's directory
// entry is not synced: Ingest links or copies the file and syncs its own
// directory. After an error the file is incomplete; Close removes it.
func (w *ExternalWriter) Close() error {
	if w.closed {
		return base.InvalidArgumentErrorf("vigil: external table %s: writer closed", w.path)
	}
	w.closed = true
	err := w.err
	if err == nil {
		err = w.writeTombs()
	}
	if err != nil {
		w.w.Abort()
		_ = w.fs.Remove(w.path)
		return err
	}
	if _, err := w.w.Close(); err != nil {
		_ = w.fs.Remove(w.path)
		return fmt.Errorf("vigil: external table %s: %w", w.path, err)
	}
	return nil
}

// Abort stops writing and removes the file. Safe after Close (it then
// does nothing).
func (w *ExternalWriter) Abort() {
	if w.closed {
		return
	}
	w.closed = true
	w.w.Abort()
	_ = w.fs.Remove(w.path)
}

// writeTombs adds the range deletions, merged: overlapping or adjacent
// ranges become one, so the table's tombstones are disjoint, as an
// external table's must be (they all share one seqnum).
func (w *ExternalWriter) writeTombs() error {
	c := w.cmp
	slices.SortFunc(w.tombs, func(a, b externalTomb) int { return c.Cmp(a.start, b.start) })
	var merged []externalTomb
	for _, t := range w.tombs {
		if n := len(merged); n > 0 && c.Cmp(t.start, merged[n-1].end) <= 0 {
			if c.Cmp(t.end, merged[n-1].end) > 0 {
				merged[n-1].end = t.end
			}
			continue
		}
		merged = append(merged, t)
	}
	for _, t := range merged {
		if err := w.w.AddRangeDel(t.start, t.end, 0); err != nil {
			return fmt.Errorf("vigil: external table %s: %w", w.path, err)
		}
	}
	return nil
}
