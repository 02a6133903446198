package sst

import (
	"fmt"

	"github.com/vigildb/vigil/checksum"
	"github.com/vigildb/vigil/internal/base"
)

// Compression is a block compression algorithm: the one type for the
// concept (the root package's Options.Compression is an alias of it). Its
// zero value is DefaultCompression, which means Snappy, so that a zero
// WriterOptions or vigil.Options compresses as the defaults say; "no
// compression" has its own name, NoCompression.
//
// The byte stored on disk (each block trailer's compression byte, which is
// also the last byte its checksum covers, and the table properties) is
// RocksDB's numbering, a different one (0 is no compression): convert with
// Code and CompressionFromCode, never by a cast.
type Compression uint8

// The compression types a table can use.
const (
	// DefaultCompression is Snappy, what an unset option means. The writer
	// resolves it (see Resolve); no file records "default".
	DefaultCompression Compression = iota
	// NoCompression stores every block as it is.
	NoCompression
	// SnappyCompression stores a block in Snappy's block format
	// (github.com/golang/snappy) when that saves at least 1/8 of it.
	SnappyCompression
	// ZstdCompression stores a block as one zstd frame
	// (github.com/klauspost/compress/zstd) at WriterOptions.ZstdLevel
	// when that saves at least 1/8 of it: smaller tables than Snappy's
	// for slower writes and reads.
	ZstdCompression
)

// numCompressions is one more than the largest valid Compression.
const numCompressions = 4

// defaultCompression is what DefaultCompression means.
const defaultCompression = SnappyCompression

// compressionCodes are RocksDB's CompressionType numbers, in Compression
// order. They are part of the on-disk format and never change.
var compressionCodes = [numCompressions]uint8{1, 0, 1, 7}

// invalidCompression is what CompressionFromCode returns for a code no
// compression has: not Valid.
const invalidCompression Compression = 0xff

// String returns "none", "snappy" or "zstd"; DefaultCompression is
// "default(snappy)", an invalid value renders as written, "Compression(N)".
func (c Compression) String() string {
	switch c {
	case DefaultCompression:
		return "default(snappy)"
	case NoCompression:
		return "none"
	case SnappyCompression:
		return "snappy"
	case ZstdCompression:
		return "zstd"
	}
	return fmt.Sprintf("Compression(%d)", uint8(c))
}

// Valid reports whether c is a known compression (DefaultCompression
// included).
func (c Compression) Valid() bool { return c < numCompressions }

// Resolve returns the compression c means: Snappy for DefaultCompression, c
// itself otherwise (an invalid c stays invalid).
func (c Compression) Resolve() Compression {
	if c == DefaultCompression {
		return defaultCompression
	}
	return c
}

// Code returns the byte stored on disk for c: RocksDB's numbers, 0 for none,
// 1 for Snappy, 7 for zstd. DefaultCompression gives Snappy's; an invalid c gives
// 0xff, which no compression has.
func (c Compression) Code() uint8 {
	if c.Valid() {
		return compressionCodes[c]
	}
	return 0xff
}

// CompressionFromCode returns the compression whose Code is b, never
// DefaultCompression. A code no compression has gives an invalid
// Compression, which Valid rejects: a decoder must check it and report the
// byte it read.
func CompressionFromCode(b uint8) Compression {
	switch b {
	case 0:
		return NoCompression
	case 1:
		return SnappyCompression
	case 7:
		return ZstdCompression
	}
	return invalidCompression
}

// Format constants. They are part of the on-disk format.
const (
	// FormatVersion is the footer's format version this package writes and
	// the only one it reads.
	FormatVersion = 1
	// Magic is the footer's last 8 bytes (little-endian): "vigilSST".
	Magic uint64 = 0x5453536c69676976
	// FooterLen is the footer's fixed size.
	FooterLen = 53
	// BlockTrailerLen is the size of the trailer after every block.
	BlockTrailerLen = 5
	// MaxBlockSize bounds every block, compressed or not. The writer refuses
	// entries that cannot fit in a block this size (see MaxEntrySize) and
	// the reader refuses larger blocks before allocating, so a corrupt
	// length can never make it allocate more than this.
	MaxBlockSize = 256 << 20
	// MaxEntrySize bounds len(user key) + len(value) of one entry: a block
	// holding only that entry (its three varints, the 8-byte trailer and a
	// one-element restart array) must fit in MaxBlockSize.
	MaxEntrySize = MaxBlockSize - 32
)

// Defaults used by the writer for zero-valued options.
const (
	DefaultBlockSize            = 4096
	DefaultBlockRestartInterval = 16
	DefaultBloomBitsPerKey      = 10 // what the DB passes by default; the zero value means no filter
)

// WriterOptions configure a Writer. The zero value is usable: like every
// options struct of Vigil's, a zero enum means its default, so a zero
// WriterOptions writes XXH3 checksums and Snappy compression (checksum.None
// and NoCompression must be asked for), but no filter (BloomBitsPerKey 0).
type WriterOptions struct {
	// ChecksumType protects every block and the footer. Stored in the
	// footer (resolved: Default is written as XXH3); readers take it from
	// there.
	ChecksumType checksum.Type
	// Compression applies to data, index and range-del blocks;
	// DefaultCompression is Snappy.
	Compression Compression
	// ZstdLevel is zstd's level for ZstdCompression, 1 (fastest) to
	// MaxZstdLevel (smallest); 0 means DefaultZstdLevel (3). Other
	// compressions ignore it.
	ZstdLevel int
	// BlockSize is the uncompressed size at which a data block is closed.
	// 0 means DefaultBlockSize (4096). A single entry larger than it gets a
	// block of its own.
	BlockSize int
	// BlockRestartInterval is the number of entries between restart points
	// in data and range-del blocks. 0 means DefaultBlockRestartInterval (16).
	BlockRestartInterval int
	// BloomBitsPerKey sizes the bloom filter; 0 writes no filter. 10 gives a
	// false-positive rate of about 1%.
	BloomBitsPerKey int
	// FileNum names the table in error messages.
	FileNum uint64
	// External writes a table for ingestion into a DB (see "External
	// tables" in the package comment): every entry must have seqnum 0,
	// point keys strictly increasing user keys (one entry per user key),
	// range tombstones non-overlapping, and the properties mark the table
	// external so that a reader can give its entries one global seqnum.
	External bool
	// Identity is the table's identity, stored in its properties (the
	// DB sets its id, the session's and the file number; an external
	// writer a session of its own). The zero identity is not stored.
	Identity Identity
	// Comparer orders the table's user keys: Add and AddRangeDel check
	// their order with it, the index separators are shortened with its
	// Separator, and its Name is stored in the properties (as
	// "rocksdb.comparator", unless it is the default's), so that no
	// reader can read the table under another order. When it has a
	// Split, the bloom filter holds the keys' distinct prefixes rather
	// than the keys (a prefix filter, which can exclude a table from a
	// scan of one prefix). nil means base.DefaultComparer, bytewise,
	// whose tables are byte for byte what they were before comparers.
	Comparer *base.Comparer

	// BaseContext is the per-file context value mixed into every block
	// checksum (see the package comment). 0, the normal setting, picks a
	// random non-zero value; tests set it to build byte-identical files.
	BaseContext uint32
	// CreationTime is stored in the properties, in Unix seconds. 0 means
	// now; tests set it to build byte-identical files.
	CreationTime int64
}

// validate reports the first invalid option; the error wraps
// ErrInvalidArgument.
func (o *WriterOptions) validate() error {
	switch {
	case !o.ChecksumType.Valid():
		return invalidArgf("unknown checksum type %s", o.ChecksumType)
	case !o.Compression.Valid():
		return invalidArgf("unknown compression %s", o.Compression)
	case o.ZstdLevel < 0 || o.ZstdLevel > MaxZstdLevel:
		return invalidArgf("zstd level %d out of range [0, %d]", o.ZstdLevel, MaxZstdLevel)
	case o.BlockSize < 0 || o.BlockSize > MaxBlockSize:
		return invalidArgf("block size %d out of range [0, %d]", o.BlockSize, MaxBlockSize)
	case o.BlockRestartInterval < 0:
		return invalidArgf("negative block restart interval %d", o.BlockRestartInterval)
	case o.BloomBitsPerKey < 0 || o.BloomBitsPerKey > 1000:
		return invalidArgf("bloom bits per key %d out of range [0, 1000]", o.BloomBitsPerKey)
	case o.Comparer.Check() != "":
		return invalidArgf("%s", o.Comparer.Check())
	}
	return nil
}

// ReadOptions are the choices of one read (Reader.GetRefWithOptions,
// Reader.NewIterWithOptions). The zero value verifies everything.
type ReadOptions struct {
	// SkipChecksums reads data blocks missing from the block cache without
	// verifying their trailer checksums: RocksDB's ReadOptions with
	// verify_checksums = false, for those who measure what checking costs.
	// Bounds are still checked and decompression still validates its input,
	// so a damaged block can return wrong data but never crash a reader. A
	// block so read is cached apart from verified ones: reads that verify
	// never see it. NewUncachedIter (compaction) and Verify always verify.
	SkipChecksums bool
	// Prefix, if not nil, says that an iterator will be used only for the
	// keys whose prefix (under the comparer's Split) is Prefix: the
	// caller's bounds keep it within the prefix. A table whose prefix
	// filter excludes Prefix (see Reader.MayContainPrefix) then gives an
	// empty iterator without reading a data block, which is what makes a
	// scan of one prefix skip most tables; otherwise the iterator is the
	// usual one, keys of other prefixes included. Get ignores it.
	Prefix []byte
	// Filter, if not nil, counts the bloom filter probes of these reads
	// (Get's and a prefix iterator's; see FilterStats).
	Filter *FilterStats
}

// ReaderOptions configure a Reader.
type ReaderOptions struct {
	// FileNum names the table in error messages (with the file name given
	// to Open).
	FileNum uint64
	// Cache is the block cache shared by all tables; nil means none. Data
	// blocks read through it live in its manual (non-Go-heap) memory, held
	// by reference counts (see package cache and Reader.GetRef).
	Cache *Cache
	// CacheID is this table's key namespace in Cache. It must be unique per
	// open Reader (the DB allocates one per open table) and is evicted by
	// Close.
	CacheID uint64
	// ParanoidCacheChecks re-verifies a cached block's checksum on every
	// cache hit, to catch memory corruption of long-lived cached blocks. The
	// checksum (checksum.Sum64 of the file's type over the decompressed
	// block) is computed when the block is inserted; with checksum type None
	// there is nothing to check.
	ParanoidCacheChecks bool
	// GlobalSeqNum, if not 0, is the sequence number of every entry of an
	// external table (one the DB ingested): where the reader decodes a
	// trailer it reports this seqnum instead of the stored 0, so the file
	// is never rewritten. Open refuses it (ErrCorruption) for a table whose
	// properties do not mark it external. 0, the normal setting, reads the
	// stored seqnums.
	GlobalSeqNum uint64
	// Expect, if not nil, is what the table's owner recorded of it; Open
	// fails with ErrCorruption, naming both, unless the table matches.
	Expect *Expected
	// Comparer is the order the table's keys are read in: the index
	// search, seeks, bounds, Get's equality, and the order checks of
	// Open, Verify and Salvage. It must be the one the table was
	// written with: Open refuses a table whose recorded comparer name
	// (none recorded means the default's) differs from its Name, and a
	// table with a prefix filter when it has no Split, with an error
	// wrapping ErrInvalidArgument that names both. nil means
	// base.DefaultComparer.
	Comparer *base.Comparer
}

// Identity names a table for good (see base.TableIdentity): the DB and
// session that wrote it and its file number.
type Identity = base.TableIdentity

// Expected is what a DB's MANIFEST records of a table. Opening a table
// with ReaderOptions.Expect checks the file against it, from the footer
// and properties Open reads anyway: its size, its identity, its whole-file
// checksum and checksum type. A table replaced by another of the same size
// (another DB's, another number's, an older state's) is ErrCorruption at
// open, for every reader alike.
type Expected struct {
	Size         uint64
	Identity     Identity
	FileChecksum uint64
	ChecksumType checksum.Type
}
