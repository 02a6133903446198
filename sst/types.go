package sst

import (
	"github.com/vigildb/vigil/internal/base"
	"github.com/vigildb/vigil/internal/cache"
)

// The key, iterator and cache-handle types of the package's API. They are
// the engine's own (defined in internal packages, shared with the memtable
// and the DB), re-exported whole because users of package sst handle
// values of them: keys they compare and print, iterators they drive,
// handles they release. (The block cache itself is opaque: Cache.)
type (
	// InternalKey is a user key with its trailer: sequence number and Kind.
	InternalKey = base.InternalKey
	// Kind is the kind of an entry: KindSet, KindDelete, KindMerge or KindRangeDelete.
	Kind = base.Kind
	// InternalIterator iterates internal keys in order (First, SeekGE,
	// Next, Prev, ...); its keys and values are valid until its next
	// positioning call.
	InternalIterator = base.InternalIterator
	// RangeTombstone is a range deletion [Start, End) at a sequence number.
	RangeTombstone = base.RangeTombstone
	// CacheHandle is a reference to a cached block; Release it exactly
	// once. It is the cache's own handle, named here because GetRef and
	// iterators hand it out and their callers must release it.
	CacheHandle = cache.Handle
	// Comparer orders user keys (WriterOptions.Comparer,
	// ReaderOptions.Comparer): the engine's one type for the concept,
	// named here so that users of package sst can build one.
	Comparer = base.Comparer
)

// The entry kinds.
const (
	KindDelete      = base.KindDelete
	KindSet         = base.KindSet
	KindMerge       = base.KindMerge
	KindRangeDelete = base.KindRangeDelete
)

// The errors of the package, the same values as the root package's
// vigil.ErrCorruption and vigil.ErrInvalidArgument: test with errors.Is.
var (
	ErrCorruption      = base.ErrCorruption
	ErrInvalidArgument = base.ErrInvalidArgument
)
