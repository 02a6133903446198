package sst

import (
	"github.com/vigildb/vigil/internal/base"
	"github.com/vigildb/vigil/internal/cache"
)

// The key, iterator and cache types of the package's API. They are the
// engine's own (defined in internal packages, shared with the memtable and
// the DB), named here so that users of package sst can name them.
type (
	// InternalKey is a user key with its trailer: sequence number and Kind.
	InternalKey = base.InternalKey
	// Kind is the kind of an entry: KindSet, KindDelete or KindRangeDelete.
	Kind = base.Kind
	// InternalIterator iterates internal keys in order (First, SeekGE,
	// Next, Prev, ...); its keys and values are valid until its next
	// positioning call.
	InternalIterator = base.InternalIterator
	// RangeTombstone is a range deletion [Start, End) at a sequence number.
	RangeTombstone = base.RangeTombstone
	// Cache is the block cache shared by the tables of a DB: sharded CLOCK,
	// blocks outside the Go heap, reference counted.
	Cache = cache.Cache
	// CacheHandle is a reference to a cached block; Release it exactly once.
	CacheHandle = cache.Handle
)

// The entry kinds.
const (
	KindDelete      = base.KindDelete
	KindSet         = base.KindSet
	KindRangeDelete = base.KindRangeDelete
)

// The errors of the package, the same values as the root package's
// vigil.ErrCorruption and vigil.ErrInvalidArgument: test with errors.Is.
var (
	ErrCorruption      = base.ErrCorruption
	ErrInvalidArgument = base.ErrInvalidArgument
)

// NewCache returns a block cache of capacityBytes (0: none, a nil *Cache,
// which caches nothing).
func NewCache(capacityBytes int64) *Cache { return cache.New(capacityBytes) }
