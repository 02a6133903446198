// Package sst reads and writes Vigil's sorted string tables: immutable files
// of internal keys (user key ‖ 8-byte trailer) in order, split into
// checksummed blocks, with a bloom filter over user keys (or their
// prefixes), a block of range tombstones, a properties block and an index.
//
// # Key order
//
// A table's user keys are ordered by a comparer (base.Comparer:
// WriterOptions.Comparer, ReaderOptions.Comparer), bytewise by default.
// Internal keys order by the comparer on their user keys, then by trailer
// descending. Every order this comment speaks of ("ascending", "increasing",
// "<") is that order; byte order is said where it is meant. The comparer's
// name is recorded in the properties ("rocksdb.comparator", absent for the
// default) and a reader refuses a table of another name. A table written
// with the default comparer is byte for byte what it was before comparers.
//
// This comment is the format's specification. The golden files in testdata
// pin it byte for byte; a change to anything below is a format change and
// needs a new FormatVersion.
//
// # File layout
//
// Every region is a block followed by its 5-byte trailer, and the regions are
// contiguous, in this order, with no gaps (the reader checks that the handles
// tile the file exactly, so no byte of a valid file is outside a checksummed
// region):
//
//	offset 0
//	+------------------+---------+
//	| data block 0     | trailer |  entries: internal key -> value
//	+------------------+---------+
//	| data block 1     | trailer |
//	+------------------+---------+
//	|   ...            |         |
//	+------------------+---------+
//	| filter block     | trailer |  only if BloomBitsPerKey > 0
//	+------------------+---------+
//	| range-del block  | trailer |  always present (may have no entries)
//	+------------------+---------+  <- end of the whole-file checksum's range
//	| properties block | trailer |
//	+------------------+---------+
//	| index block      | trailer |  separator -> data block handle
//	+------------------+---------+
//	| metaindex block  | trailer |  name -> handle of filter/range-del/properties
//	+------------------+---------+
//	| footer (53 bytes)          |  fixed size, the last bytes of the file
//	+----------------------------+
//
// A block handle is (offset, size): the block's first byte in the file and
// its length on disk, excluding the trailer. In blocks it is encoded as two
// uvarints; in the footer as two fixed 8-byte little-endian integers.
//
// # Blocks
//
// A block is a run of prefix-compressed entries, then a restart array:
//
//	+---------+---------+-----+-------------+-----+---------------+--------------+
//	| entry 0 | entry 1 | ... | restart[0]  | ... | restart[n-1]  | n (uint32 LE)|
//	+---------+---------+-----+-------------+-----+---------------+--------------+
//	                            uint32 LE offsets of restart entries
//
//	entry := shared uvarint | unshared uvarint | valueLen uvarint
//	         | key[shared:] (unshared bytes) | value (valueLen bytes)
//
// An entry's key is the previous entry's key[:shared] followed by the
// unshared bytes. Every BlockRestartInterval-th entry (16 by default; 1 in
// index and metaindex blocks) is a restart point: it has shared == 0 and its
// offset is in the restart array, so a reader can binary-search the restart
// points and decode forward from one. restart[0] is 0. A block with no entries
// is just n = 0 (4 bytes). The varints are at most 5 bytes (uint32 values).
//
// Keys of data blocks are encoded internal keys: user key ‖ trailer, the
// trailer a little-endian uint64 seqnum<<8 | kind, kind Set (1) or Delete (0),
// in strictly increasing internal-key order (user key ascending under the
// comparer, trailer descending). Values are the user values (empty for
// Delete). Keys are compared only as whole internal keys or user keys,
// never by their prefix-compressed bytes, so the block format is the same
// under every comparer.
//
// # Block trailer
//
//	+------------------+-----------------------------+
//	| compression byte | checksum (uint32 LE)        |
//	+------------------+-----------------------------+
//
// The compression byte is 0 (none), 1 (snappy block format) or 7 (one zstd
// frame with its content size and no frame checksum), RocksDB's numbers, of
// the whole block including its restart array. The checksum is
//
//	checksum.Block(t, block, compressionByte) + checksum.ContextModifier(base, blockOffset)   (mod 2^32)
//
// where t is the file's checksum type and base its per-file context value,
// both from the footer. The modifier makes a block copied from another offset
// or another file fail its check even when its bytes are intact. For
// checksum type None, checksum.Block is 0, so the stored value is the
// modifier alone: None still catches a misplaced block, weakly, but no
// corruption of its content.
//
// A writer compresses a block only if that saves at least 1/8 of its size;
// filter, properties and metaindex blocks are never compressed. No block,
// compressed or not, may exceed MaxBlockSize bytes; a reader rejects a
// snappy block whose declared decoded length exceeds MaxBlockSize or what
// snappy can possibly produce from its input (64/3 bytes per input byte),
// and a zstd block whose frame header declares no content size, more than
// MaxBlockSize or more than 128 bytes per stored byte, before allocating for
// it (a writer stores a block that zstd would shrink further, a long run of
// one byte, uncompressed).
//
// # Index block
//
// One entry per data block, in file order: key = a separator, an encoded
// internal key >= the block's last key and < the next block's first key (the
// last block uses its last key); value = the block's handle (two uvarints).
// Separators are shortened where possible, by the comparer's Separator: if
// the user key of the block's last key a is below that of the next block's
// first key b, s = Separator(a, b); if s is strictly between the two user
// keys, the separator is s with trailer (SeqNumMax, kind 15). Otherwise
// (the same user key on both sides, or a Separator that could not shorten)
// it is a itself. So a shortened separator's user key is strictly between
// a's and b's, which Get relies on. For the default comparer the rule is
// base.BytewiseSeparator's: where a and b first differ, at byte i, if
// a[i] < 0xff and either a[i]+1 < b[i] or len(b) > i+1, s = a[:i] ‖ a[i]+1.
// A reader checks that the separators increase under its comparer.
// Restart interval 1: every entry is a restart point (shared == 0, its
// offset in the restart array), and a reader rejects an index block where
// one is not, so each separator is stored whole and can be read in place.
// Data block i must start where block i-1's trailer ends, block 0 at offset 0.
//
// # Filter block
//
// A cache-line-blocked bloom filter over the table's distinct user keys
// (absent when BloomBitsPerKey is 0), or, when the comparer has a Split,
// over their distinct prefixes key[:Split(key)], each once: a prefix
// filter, marked by the property "vigil.filter.prefix". A reader asks a
// prefix filter about a key's prefix (Reader.MayContain), or about a
// prefix a scan is limited to (Reader.MayContainPrefix, ReadOptions.Prefix),
// and a whole-key filter only about whole keys. Entries (user keys or
// prefixes) are hashed as bytes, whatever the comparer:
//
//	+----------------------------------+-----------------+------------------------+
//	| numLines × 64-byte lines         | numProbes (1 B) | numLines (uint32 LE)   |
//	+----------------------------------+-----------------+------------------------+
//
// numLines = ceil(entries × bitsPerKey / 512) (0 for a table without point
// keys: such a filter matches nothing), numProbes = clamp(bitsPerKey × 69 /
// 100, 1, 30). For an entry e (a user key or a prefix) with
// h = XXH3-64(e), lo = uint32(h), hi = uint32(h >> 32): its line is (lo × numLines) >> 32, and probe j
// (j = 0 .. numProbes-1) sets bit (hi + j×delta) mod 512 of the line, where
// delta = hi>>17 | hi<<15 and bit b of a line is bit b%8 of its byte b/8.
// With 10 bits per key the false-positive rate is about 1%.
//
// # Range-del block
//
// One entry per range tombstone [start, end)#seq: key = start ‖ trailer
// (seq, RangeDelete), value = end; in internal-key order (start ascending,
// seq descending), start < end under the comparer. Restart interval
// BlockRestartInterval (16 by default), except that an entry whose key
// would bring the total length of the block's keys above 16 times the
// block's size is made a restart point (stored whole) instead. A reader rejects a range-del block whose
// keys total more than 16 times its size: it loads the tombstones at open,
// and without the bound prefix compression would let a block of n entries
// of a few bytes each hold n²/2 bytes of keys. A block written with restart
// interval <= 16 is always within the bound (a key is at most the size of
// its restart interval), so for such blocks the early restarts never happen.
//
// # Properties block
//
// Named properties, keys in ascending byte order, each exactly once: integer
// values are uvarints that fill the value exactly; keys are encoded internal
// keys (empty for an empty table). See Properties for the names and meaning.
// "vigil.file.checksum" is checksum.Sum64(t, file[0 : properties offset]):
// a checksum of every byte before the properties block, i.e. all data
// blocks, the filter and range-del blocks and their trailers. (It cannot
// cover the properties block, which contains it; the blocks after it are
// covered by their own trailers and the footer checksum.) For checksum type
// None it is 0 and not checked. The DB records it in the MANIFEST and
// Verify recomputes it.
//
// Two optional properties record what the comparer made of the table; a
// table written with the default comparer and no prefix filter has neither,
// so it is unchanged:
//
//   - "rocksdb.comparator" (sorted first) is the comparer's Name, its bytes
//     as they are (RocksDB's name and encoding for it), not empty; stored
//     only for a comparer other than the default. A table without it
//     (written by the default comparer, or before comparers existed) is
//     bytewise: Properties.ComparerName reads as base.BytewiseComparerName.
//     Open refuses, with an error wrapping ErrInvalidArgument that names
//     both, a table whose comparer name is not the reader's comparer's, and
//     it checks this before the index separators' and the tombstones' order.
//   - "vigil.filter.prefix" = 1 (sorted between "vigil.file.checksum" and
//     "vigil.filter.size") marks a prefix filter; only with a filter. A
//     reader whose comparer has no Split refuses such a table
//     (ErrInvalidArgument): it could not find a key's prefix.
//
// # External tables
//
// A table written outside a DB for ingestion (WriterOptions.External) has
// the optional property "vigil.external" = 1, sorted between
// "vigil.data.size" and "vigil.file.checksum"; no other table stores it, so
// other tables are unchanged. An external table promises: every entry and
// tombstone has seqnum 0 (so SmallestSeq = LargestSeq = 0), no user key has
// two point entries, and its range tombstones do not overlap (each starts
// at or after the previous one's end). Open checks the properties and the
// tombstones, Verify the points. The DB gives all entries of an ingested
// table one sequence number, the global seqnum, recorded in its MANIFEST
// entry, not in the file, which is never rewritten: a Reader opened with
// ReaderOptions.GlobalSeqNum reports it wherever it decodes a trailer (an
// iterator's keys, Get's seqnum, the range tombstones), and Get finds
// nothing at a snapshot below it. Because each user key has one entry, the
// substitution cannot make two entries equal, and because the stored
// seqnum is 0, every snapshot sees it when searching the blocks.
//
// # Metaindex block
//
// name -> handle for "vigil.filter" (if present), "vigil.properties" and
// "vigil.rangedel", in that (byte) order; restart interval 1. The metaindex
// block must end (with its trailer) exactly where the footer starts.
//
// # Footer
//
//	offset  size  field
//	     0     1  checksum type (checksum.Type.Code: 0 none ... 5 crc64)
//	     1     4  format version (uint32 LE), FormatVersion
//	     5     4  base context value (uint32 LE), random, non-zero
//	     9     8  metaindex block offset (uint64 LE)
//	    17     8  metaindex block size
//	    25     8  index block offset
//	    33     8  index block size
//	    41     4  footer checksum (uint32 LE)
//	    45     8  magic number 0x5453536c69676976 ("vigilSST" in LE bytes)
//
// The footer checksum is checksum.Value(t, footer[0:41]) +
// checksum.ContextModifier(base, footerOffset). A reader checks, in order:
// the file is at least FooterLen bytes, the magic, the version, the checksum
// type, base != 0, the footer checksum, then the handles. Every failure is an
// error wrapping ErrCorruption that names the file, e.g. "Corrupt or
// unsupported checksum type: 123 in 000007.sst". Because the type byte is
// part of the checksummed bytes, a flip that turns it into another valid
// type (even None) fails the footer check.
//
// # Reading
//
// Open reads and verifies the footer, metaindex, index, filter, properties
// and range-del blocks and cross-checks them (block tiling, counts and sizes
// in the properties against the blocks), after checking that the table's
// comparer is the reader's. Data blocks are read on demand,
// verified, decompressed and optionally cached in a shared Cache.
// Nothing decoded from the file is trusted: every varint, length, offset and
// count is bounds-checked, and bad bytes give an error wrapping
// ErrCorruption (naming file, block kind and offset), never a panic.
// A block is only allocated after its handle has been checked against the
// file size (and MaxBlockSize, and for snappy the expansion bound above).
// What is decoded from a block is at most a small constant factor larger
// than the block, however its entries use prefix compression: the index is
// kept as the block and searched in place, Open copying no separator (it
// keeps 32 bytes per entry, which takes at least 17 bytes of the block);
// the tombstones' start keys
// are at most 16 times the range-del block (see above) plus a 56-byte
// RangeTombstone per entry of at least 5 bytes; and a block iterator's
// memory is linear in the block, not in the total length of its keys (see
// blockIter). So Open allocates at most a small multiple (the tests check
// 32) of the bytes it reads and decompresses.
//
// # Concurrency and memory
//
// A Writer is used by one goroutine. A Reader is immutable after Open and
// shared by any number of goroutines; its iterators are single-goroutine
// and pooled. Data blocks are cached decompressed in an optional shared
// Cache keyed by (ReaderOptions.CacheID, block offset), in memory
// outside the Go heap that is freed as soon as the last reference to a
// block goes (see package cache): so every read of a cached block holds a
// reference. An iterator holds one on its current block, released when it
// moves to another block or closes: keys and values it returns are valid
// until its next positioning call or Close, and no longer. GetRef returns
// its value with the reference (CacheHandle) that keeps it valid, to be
// released by the caller; Get copies the value out and releases at once.
// GetRef and iterator steps over cached blocks do not allocate. Without a
// cache, and for the uncached (compaction) iterator and Verify, blocks are
// read into Go heap buffers and nothing is counted.
package sst
