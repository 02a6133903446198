package vigil

import (
	"errors"

	"github.com/vigildb/vigil/internal/base"
)

// Error sentinels, tested with errors.Is. Every error Vigil returns wraps at
// most one of them, with context: a corruption error names what and where
// (file number, block offset, key in hex, the two checksums that disagreed).
var (
	// ErrNotFound: Get found no live value for the key.
	ErrNotFound = base.ErrNotFound
	// ErrCorruption: bytes failed a checksum, an order check or a bounds check,
	// on disk or in memory.
	ErrCorruption = base.ErrCorruption
	// ErrInvalidArgument: bad options or arguments.
	ErrInvalidArgument = base.ErrInvalidArgument
	// ErrClosed: the DB, snapshot or iterator was closed.
	ErrClosed = base.ErrClosed
	// ErrReadOnly: the DB does not accept writes, because it was opened
	// ReadOnly or because a background error (a failed flush, a corruption
	// found at flush or compaction) stopped it. The background error is
	// wrapped too.
	ErrReadOnly = base.ErrReadOnly
	// ErrConflict: a transaction's Commit found that a key or range it read
	// was written after its snapshot (see Txn). Nothing was written; retry
	// the transaction.
	ErrConflict = base.ErrConflict
	// ErrMergeOperand: a built-in Merger met an operand or value it cannot
	// read (see Uint64AddMerger); the read that needed it fails.
	ErrMergeOperand = errors.New("vigil: bad merge operand")
)
