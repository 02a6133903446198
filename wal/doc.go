// Package wal implements Vigil's record log: the format of the write-ahead
// log (NNNNNN.log) and of the MANIFEST. A Writer appends logical records of
// any size; a Reader returns them in order and, when the bytes on disk are
// damaged, behaves according to a RecoveryMode.
//
// # File layout
//
// A record log is a sequence of 32 KiB blocks (BlockSize). The first
// FileHeaderSize (24) bytes of block 0 are the file header; fragments follow
// immediately, so block 0 carries BlockSize-24 bytes of fragments and every
// later block BlockSize. Block boundaries stay at multiples of BlockSize in
// file offsets, which is what the reader resynchronises on.
//
//	block 0                                         block 1
//	+-------------+------+------+-----+---------+   +------+------+-----+
//	| file header | frag | frag | ... | padding |   | frag | frag | ... |
//	| 24 bytes    |      |      |     | 0..6 B  |   |      |      |     |
//	+-------------+------+------+-----+---------+   +------+------+-----+
//
// File header (fixed size, version 2):
//
//	 0          8         9           10         12                20         24
//	+-----------+---------+-----------+----------+-----------------+----------+
//	| magic     | version | checksum  | reserved | log number      | header   |
//	| "VIGLRLOG"| 2       | type byte | 0x0000   | uint64 LE       | CRC (LE) |
//	+-----------+---------+-----------+----------+-----------------+----------+
//
// Byte 10 holds flags: 0x01 says the log is recycled (see Recycling); the
// other bits and byte 11 must be zero.
//
// The checksum type byte is checksum.Type.Code, RocksDB's numbering (0 none
// ... 5 crc64); a Writer given checksum.Default writes XXH3's.
//
// The header CRC is the masked CRC-32C (checksum.MaskCRC32c) of bytes
// [0, 20). It is always CRC-32C, whatever the log's checksum type: the type
// byte is what tells a reader how to check everything else, so it cannot be
// guarded by itself (with type None the header would be unguarded). The
// checksum type is taken from the header, never from the reader's caller, so
// a log written under one DB setting is read back correctly under any other.
// The version and the reserved bytes let a later format be refused cleanly
// instead of being misread. A reader reads version 2 only: any other
// version, version 1 included (whose fragment checksums covered the type and
// payload but not the length), fails NewReader with an error wrapping
// base.ErrCorruption that names the version ("unsupported record log format
// version 1 (this build reads version 2)"), as RocksDB reports a table of an
// unknown format_version. Vigil made no release with version 1.
//
// # Fragments
//
// A logical record is stored as one FULL fragment, or as FIRST, MIDDLE*,
// LAST fragments when it does not fit in what is left of the block. A
// fragment never crosses a block boundary. Each fragment is
//
//	+--------------+------------+----------+-------------------+
//	| checksum     | length     | type     | payload           |
//	| uint32 LE    | uint16 LE  | 1 byte   | length bytes      |
//	+--------------+------------+----------+-------------------+
//	  FULL=1 FIRST=2 MIDDLE=3 LAST=4; length <= BlockSize-7
//
// When fewer than 7 bytes (FragmentHeaderSize) remain in a block the writer
// fills them with zeros and starts the next block; a reader checks that this
// padding is zero. A record may be empty (a FULL fragment of length 0), and
// when exactly 7 bytes remain a record starts with an empty FIRST fragment.
//
// # Fragment checksum
//
// For a log of checksum type t, number L, and a fragment whose header is at
// file offset off:
//
//	stored = lo32(H_t(length ‖ type ‖ payload)) + ctx(L, off)   (mod 2^32)
//	ctx(L, off) = (lo32(L) ^ hi32(L) ^ 0x7667_6c31) ^ (lo32(off) + hi32(off))
//
// H_t is checksum.Sum64 of the log's type: masked CRC-32C for CRC32c
// (masked as LevelDB masks its fragment CRC, which covers only type ‖
// payload), XXH32, XXH64, XXH3-64, or
// CRC-64/Jones in its inverted form (initial value and final xor all ones).
// The hash covers every byte of the fragment after the checksum field: the
// length and type fields, as stored (length little-endian), and the
// payload; with the log number and offset bound in by ctx, every bit of the
// header but the checksum itself is covered, so any flipped bit in a
// fragment that is all there fails its check. The three header bytes sit
// right before the payload, so length ‖ type ‖ payload is one contiguous
// slice (the fragment from byte 4 on), hashed in place in a single call: no
// copy, no streaming state, no trailing-byte trick.
//
// The context term binds each fragment to its log and to its position, in
// the spirit of RocksDB's recyclable records (which store the log number in
// an 11-byte header) and of Vigil's SST context checksums, but without
// spending header bytes: a fragment left over from an earlier log in a
// reused file, a block written to the wrong offset, or a valid fragment from
// another log spliced in, all fail the check. Because ctx is added rather
// than hashed, a reader that finds a mismatch recovers stored-H = ctx', and
// when ctx' decodes to a nearby log number or a plausible offset of this log
// it says so ("computed for log 7 at this offset: log number mismatch", or
// "for offset N of this log: a misplaced fragment") instead of reporting a
// bare checksum error.
//
// With checksum type None the checksum field is written as zero and never
// checked; only the file header stays guarded.
//
// # Recovery modes
//
// The four RecoveryMode values keep RocksDB's numbers. Zeros from a record
// boundary (where the next fragment header would start, or block padding)
// to end of file are not damage at all but unwritten space: the zero
// reserve a Writer keeps past the log (Writer.SetReserve), or a file
// extended before the data of its last, unsynced appends reached the disk.
// Either way the log ends at that boundary, exactly as if the file ended
// there, in every mode (ReaderStats.UnwrittenBytes counts them). A torn
// tail is what a crash in the middle of an append leaves: a truncated
// fragment header or body at end of file, zeros to end of file after the
// FIRST (or a MIDDLE) fragment of a record, or more generally a logical
// record whose FIRST/MIDDLE fragments are intact but whose LAST never made
// it. Everything else is corruption: a checksum mismatch, a length that runs
// past its block (or past end of file while a valid fragment follows, or
// while the fragment is all there under the length it was written with; see
// "A length past end of file"), an unknown fragment type, non-zero block
// padding, zeroed bytes followed by data, fragments out of order (an orphan
// MIDDLE or LAST, a partial record followed by a FULL or FIRST).
//
//	mode                           torn tail            other corruption
//	TolerateCorruptedTailRecords   dropped, no error    error
//	AbsoluteConsistency            error                error
//	PointInTime (default)          dropped, no error    error if a fragment that verifies follows it
//	                                                    anywhere later in the file; otherwise reading
//	                                                    stops there, no error, Reader.Stopped reports it
//	SkipAnyCorruptedRecords        dropped, no error    damaged records skipped and counted, reading goes on
//
// "Error" means Next returns an error wrapping base.ErrCorruption that names
// the file, the offset of the damage and the reason, after returning every
// record before the damage.
//
// PointInTime differs from RocksDB's, which stops quietly at any corruption.
// A crash can only damage the end of what was written, so damage followed by
// an intact fragment is not a torn write: ending the log there would drop,
// without a word, writes that were acknowledged as synced (on average half
// the log for one flipped bit). So PointInTime ends the log quietly only at
// damage with nothing verifiable after it, which is indistinguishable from a
// crash-cut tail, and fails otherwise, exactly as TolerateCorruptedTailRecords
// does (the error text is the same, plus "a valid fragment follows at offset
// N" where that is not already said). Verifiable means a known type, a
// length that fits its block and a checksum that matches under this log's
// number and that offset: with both bound into the checksum, a false match
// is a 2^-32 event. Case by case, with a checked checksum type:
//
//   - checksum mismatch, bad length in a full block, unknown type, non-zero
//     padding, zeroed bytes followed by data: the reader looks for a
//     fragment that verifies after the damage (first where the damaged
//     fragment's length points, then at every later position, to end of
//     file, block by block) and fails if it finds one; damage in the last
//     record of the file, or padding or zeros followed only by bytes that do
//     not verify, end the log quietly. So does a whole fragment whose length
//     runs past end of file (it is only looked for when nothing after it
//     verifies).
//   - length past end of file with a valid fragment after it, a partial
//     record followed by a FULL or FIRST, an orphan MIDDLE or LAST: always
//     an error, since the fragment that reveals them verified (for an
//     orphan, the fragment itself); there is no quiet case.
//   - torn tails (a length past end of file with nothing valid after it and
//     no length under which the fragment is whole included) are dropped as
//     in TolerateCorruptedTailRecords.
//
// The search reads the rest of the file through the reader's one block
// buffer (PointInTime reads it anyway to count the dropped bytes) and
// hashes at most resyncBudget bytes per block, so its cost is bounded by the
// file's size even for a crafted file. One consequence is deliberate: zeros
// followed by intact fragments are corruption even past the last sync, where
// a file system that writes pages back out of order could in principle
// leave them after a crash; the design treats them, as
// TolerateCorruptedTailRecords always has, as damage to report rather than
// a tail to drop.
//
// # A length past end of file
//
// In the last block of a file (the file ends inside it) a fragment whose
// length runs past end of file is one of two things: an append a crash cut
// short, its header as written (a torn write), or a whole fragment whose
// length field was damaged afterwards. A valid fragment after it in the
// block settles it (corruption: a torn write leaves nothing after it).
// Otherwise the reader looks for the length the fragment was written with.
// The checksum covers the length, so a length l that fits the bytes present
// and under which the fragment verifies is, but for a 2^-32 accident per
// length tried, the one the writer wrote: the fragment is all there, and it
// is corruption ("bad fragment length N runs past end of file, but the FULL
// fragment is whole: it verifies with length l"). A torn write leaves the
// length as written and the bytes short, so no length that fits verifies.
// Found, it is treated as damage to the file's last record: an error in
// TolerateCorruptedTailRecords and AbsoluteConsistency, a quiet stop that
// Stopped reports in PointInTime (nothing verifiable follows it), and in
// SkipAnyCorruptedRecords the record is dropped and reading goes on where
// the fragment really ends. Covering the length is what makes a match a proof; it cannot make the
// search unnecessary: a checksum can be checked only over bytes that are
// there, and which bytes are the fragment's is what the length says.
//
// The lengths tried are the ones that end the fragment where the last whole
// fragment of a log can end, a crash after it or not:
//
//   - at end of file (a complete log: a MANIFEST, a WAL after Close or
//     after its last sync);
//   - where the fragment a crash then cut begins: a FULL header whose length
//     fits the block and reaches past the last non-zero byte, or a FIRST
//     header that fills the block (a FIRST or MIDDLE fragment always fills
//     its block; after a FULL or LAST the writer starts a new record);
//   - where only zeros follow to end of file (the zero reserve, a torn
//     append's unwritten bytes), perhaps after the first bytes of a header,
//     or where a header is cut short by end of file.
//
// The damaged fragment itself must be FULL, or LAST at the start of its
// block: a FIRST or MIDDLE one fills its block, which ends past end of file,
// so it is torn whatever its length says. End of file is tried first (one
// hash: the commonest case, a bit flipped in the length of a complete log's
// last fragment), then the torn-fragment ends from the shortest, then the
// ends in the trailing zeros from the first. Each length tried costs a hash
// of the fragment, counted against the block's resyncBudget; when it runs
// out, the fragment is taken for torn. Only an unusual fragment can outlast
// the budget: one whose payload ends in a run of zero bytes longer than
// about 4 MiB divided by its length (500 for an 8 KiB fragment), with zeros
// after it to end of file, or a long one with a torn fragment after it and
// many positions in between that look like FULL headers.
//
// SkipAnyCorruptedRecords resynchronises after damage at the next fragment
// that verifies (first where the damaged fragment's length points, then at
// each following position of the block): with the offset bound into every
// checksum a false match is a 2^-32 event, so a damaged record costs only
// itself, not the rest of its block. With checksum type None nothing can be
// verified and it resumes at the next block boundary, as RocksDB does.
// Intact MIDDLE and LAST fragments of a record whose start was lost are
// dropped with it.
//
// # Recycling
//
// A log may be written over the blocks of an older log that is no longer
// needed (NewRecycledWriter, RocksDB's recycle_log_file_num): overwriting
// blocks that are already allocated and durable costs an fdatasync per
// synced append and no file growth, no zeros written ahead and no file
// deleted and created per log. Its header carries the recycled flag, and
// the older log's bytes remain after its end. Since the log number is
// bound into every fragment's checksum, they never verify as the new
// log's. The reader ends a recycled log, in every mode, without an error
// and without counting damage (ReaderStats.StaleBytes counts the rest of
// the file):
//
//   - at a fragment that is intact but was written by an older log at
//     that offset (the context recovered from its checksum names a lower
//     log number);
//   - at damage (a mismatch, a bad length or type, bad padding) that no
//     fragment of this log verifies after, to end of file: a crash can
//     leave the new log's last fragment torn over the older bytes, or end
//     the new log inside an older fragment. A record whose FIRST fragment
//     came before is a torn tail.
//
// Damage with a fragment of this log after it stays corruption. The price
// is the blind spot of PointInTime made general: damage to the last
// record of a recycled log looks like its end, in every mode (the DB
// allows recycling only with PointInTime and SkipAnyCorruptedRecords).
// A log without checksums is never recycled: nothing could tell its end.
//
// A bad file header is an error in every mode, except that a file shorter
// than the header whose bytes are a prefix of a valid header (or zeros),
// including an empty file, is an empty log with no error in every mode but
// AbsoluteConsistency. A zeroed header followed only by zeros is treated the
// same way. Every corruption error wraps base.ErrCorruption and names the
// file, the offset and the reason.
//
// The known blind spots. Damage to the last record of a file (its last
// fragment, or any fragment with nothing verifiable after it) looks exactly
// like a torn write: PointInTime ends the log there quietly (Stopped says
// where, Stats count what was dropped), and in the last (short) block a
// corrupted length that points past end of file is taken for a torn write in
// every mode but AbsoluteConsistency only if no valid fragment follows it in
// that block and the search for its written length finds none (a fragment
// that is itself damaged besides, or one that outlasts the search's budget;
// see "A length past end of file"). With checksum type None nothing can be
// verified: a damaged
// payload goes unnoticed in every mode, a length past end of file is always
// a torn tail, and PointInTime ends the log quietly at the first corruption
// it can see, whatever follows (as LevelDB and RocksDB do).
package wal
