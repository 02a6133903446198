package base

// InternalIterator walks internal keys (user key ascending, then seqnum
// descending) of one source: a memtable, an SST, or a merge of several.
//
// Contract shared by every implementation:
//   - Positioning methods return Valid() after the move. SeekGE(k) lands on
//     the first entry whose user key is >= k (its newest version first);
//     SeekLT(k) on the last entry whose user key is < k.
//   - Next and Prev are only called on a valid iterator. Once a move returns
//     false the iterator is exhausted (or failed, see Error) until the next
//     absolute positioning call (SeekGE, SeekLT, First, Last).
//   - Key().UserKey and Value() point into the source's memory (arena or
//     block) and stay valid until the next positioning call or Close; callers
//     that keep them must copy.
//   - Lookback: after Prev, the key and value of the entry it stepped from
//     stay valid until the next positioning call too, where the source's
//     memory allows: memtables and batches always (their arena or buffer
//     outlives the iterator); tables with a block cache (the iterator keeps
//     the block it left referenced, past any empty block it crosses, and
//     a level iterator the file).
//     Reverse iteration then need not copy the version it is about to step
//     past (the DB's Iterator relies on it only with a block cache).
//   - A failed move (corruption, I/O) returns false and Error() reports why;
//     an absolute positioning call clears a previous error.
//   - An iterator is used by one goroutine at a time.
type InternalIterator interface {
	SeekGE(userKey []byte) bool
	SeekLT(userKey []byte) bool
	First() bool
	Last() bool
	Next() bool
	Prev() bool
	Valid() bool
	Key() InternalKey
	Value() []byte
	Error() error
	Close() error
}

// RangeTombstone deletes every key in [Start, End) with a sequence number
// below Seq, as seen by snapshots at or above Seq.
type RangeTombstone struct {
	Start, End []byte
	Seq        uint64
}
