package memtable

import "github.com/vigildb/vigil/internal/base"

// The key and iterator types of the package's API, the engine's own
// (defined in an internal package, shared with package sst and the DB),
// re-exported whole because users of package memtable handle values of
// them: the keys ValidateEach and iterators hand out, the iterators they
// drive.
type (
	// InternalKey is a user key with its trailer: sequence number and Kind.
	InternalKey = base.InternalKey
	// Kind is the kind of an entry: KindSet, KindDelete, KindMerge or KindRangeDelete.
	Kind = base.Kind
	// InternalIterator iterates internal keys in order; its keys and values
	// are valid until its next positioning call.
	InternalIterator = base.InternalIterator
	// RangeTombstone is a range deletion [Start, End) at a sequence number.
	RangeTombstone = base.RangeTombstone
)

// The entry kinds.
const (
	KindDelete      = base.KindDelete
	KindSet         = base.KindSet
	KindMerge       = base.KindMerge
	KindRangeDelete = base.KindRangeDelete
)

// SeqNumMax is the largest sequence number an entry may carry.
const SeqNumMax = base.SeqNumMax

// The errors of the package, the same values as the root package's
// vigil.ErrCorruption and vigil.ErrInvalidArgument: test with errors.Is.
var (
	ErrCorruption      = base.ErrCorruption
	ErrInvalidArgument = base.ErrInvalidArgument
)
