package sst

import (
	"encoding/binary"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/vigildb/vigil/checksum"
	"github.com/vigildb/vigil/internal/base"
)

// Properties describe a table. The writer stores them in the properties
// block; Reader.Properties returns them. Sizes are bytes on disk including
// block trailers. All keys are copies owned by the Properties.
type Properties struct {
	NumEntries    uint64 // point entries (Set and Delete)
	NumDeletions  uint64 // point Delete entries
	NumRangeDels  uint64 // range tombstones
	RawKeySize    uint64 // sum of encoded internal key lengths of point entries (user key + 8)
	RawValueSize  uint64 // sum of value lengths of point entries
	NumDataBlocks uint64
	DataSize      uint64 // all data blocks
	IndexSize     uint64
	FilterSize    uint64 // 0 without a filter
	RangeDelSize  uint64

	// SmallestKey and LargestKey bound the table over point keys and range
	// tombstones; a tombstone [s,e)#seq contributes s#seq,RANGEDEL and the
	// exclusive sentinel e#SeqNumMax,RANGEDEL. Zero for an empty table.
	SmallestKey, LargestKey InternalKey
	// SmallestSeq and LargestSeq are over point entries and tombstones.
	SmallestSeq, LargestSeq uint64

	// ChecksumType and Compression are the writer's settings, resolved
	// (never Default) and stored as their on-disk codes; a block may still
	// be stored uncompressed.
	ChecksumType         checksum.Type
	Compression          Compression
	BloomBitsPerKey      uint64 // 0 = no filter
	BlockSize            uint64 // the writer's target data block size
	BlockRestartInterval uint64
	CreationTime         int64 // Unix seconds
	// FileChecksum is checksum.Sum64(ChecksumType, file[0:properties block
	// offset]); 0 for checksum type None. See the package comment.
	FileChecksum uint64
	// External marks a table written for ingestion (WriterOptions.External):
	// every entry has seqnum 0, its point keys are distinct user keys and
	// its range tombstones do not overlap. Stored only when true, as the
	// optional property "vigil.external" (uvarint 1); a table without it is
	// byte for byte what it was before external tables existed.
	External bool
	// Identity names the table for good (see Identity). Stored only when
	// not zero, as the optional property "vigil.identity" (the 40 bytes
	// of base.TableIdentity.Append); tables written without one decode
	// the zero identity.
	Identity Identity
	// ComparerName is the Name of the comparer that ordered the keys
	// (WriterOptions.Comparer), which a reader must share. Stored only
	// when it is not base.BytewiseComparerName, as the optional property
	// "rocksdb.comparator" (the name's bytes, RocksDB's name and
	// encoding for it), so that bytewise tables are unchanged; a table
	// without it, written by the default comparer or before comparers
	// existed, decodes as base.BytewiseComparerName.
	ComparerName string
	// PrefixFilter says that the bloom filter holds the distinct prefixes
	// of the keys (key[:Split(key)] under the table's comparer) instead
	// of the keys. Stored only when true, as the optional property
	// "vigil.filter.prefix" (uvarint 1); only with a filter.
	PrefixFilter bool
	// FormatVersion comes from the footer (it is not stored in the block).
	FormatVersion uint32
}

// propField describes one stored property: its name and how to encode and
// decode its value.
type propField struct {
	name   string
	encode func(p *Properties, dst []byte) []byte
	decode func(p *Properties, v []byte) bool
	isKey  bool // an internal key, stored only for non-empty tables
	// optional properties are stored only when present(p) is true; a block
	// without one decodes it as its zero value.
	optional bool
	present  func(p *Properties) bool
}

func uintProp(name string, f func(p *Properties) *uint64) propField {
	return propField{
		name:   name,
		encode: func(p *Properties, dst []byte) []byte { return binary.AppendUvarint(dst, *f(p)) },
		decode: func(p *Properties, v []byte) bool {
			x, n := binary.Uvarint(v)
			*f(p) = x
			return n > 0 && n == len(v)
		},
	}
}

func keyProp(name string, f func(p *Properties) *InternalKey) propField {
	return propField{
		name:  name,
		isKey: true,
		encode: func(p *Properties, dst []byte) []byte {
			if p.empty() {
				return dst
			}
			return f(p).Append(dst)
		},
		decode: func(p *Properties, v []byte) bool {
			if len(v) == 0 {
				*f(p) = InternalKey{}
				return true
			}
			k, ok := base.DecodeInternalKey(v)
			if !ok {
				return false
			}
			*f(p) = k.Clone()
			return true
		},
	}
}

// comparerProp is "rocksdb.comparator": the comparer's name, stored only
// for a comparer other than the default, so that a bytewise table is byte
// for byte what it was before comparers (see Properties.ComparerName). Its
// value is the name's bytes, which must not be empty.
var comparerProp = propField{
	name:     "rocksdb.comparator",
	optional: true,
	present:  func(p *Properties) bool { return p.ComparerName != "" && p.ComparerName != base.BytewiseComparerName },
	encode:   func(p *Properties, dst []byte) []byte { return append(dst, p.ComparerName...) },
	decode: func(p *Properties, v []byte) bool {
		p.ComparerName = string(v)
		return len(v) > 0
	},
}

// propFields lists the stored properties in the block's (byte) order.
var propFields = []propField{
	comparerProp,
	uintProp("vigil.block.restart.interval", func(p *Properties) *uint64 { return &p.BlockRestartInterval }),
	uintProp("vigil.block.size", func(p *Properties) *uint64 { return &p.BlockSize }),
	uintProp("vigil.bloom.bits.per.key", func(p *Properties) *uint64 { return &p.BloomBitsPerKey }),
	{
		name: "vigil.checksum.type",
		encode: func(p *Properties, dst []byte) []byte {
			return binary.AppendUvarint(dst, uint64(p.ChecksumType.Code()))
		},
		decode: func(p *Properties, v []byte) bool {
			x, n := binary.Uvarint(v)
			p.ChecksumType = checksum.TypeFromCode(uint8(min(x, math.MaxUint8)))
			return n > 0 && n == len(v) && p.ChecksumType.Valid()
		},
	},
	{
		name:   "vigil.compression",
		encode: func(p *Properties, dst []byte) []byte { return binary.AppendUvarint(dst, uint64(p.Compression.Code())) },
		decode: func(p *Properties, v []byte) bool {
			x, n := binary.Uvarint(v)
			p.Compression = CompressionFromCode(uint8(min(x, math.MaxUint8)))
			return n > 0 && n == len(v) && p.Compression.Valid()
		},
	},
	{
		name:   "vigil.creation.time",
		encode: func(p *Properties, dst []byte) []byte { return binary.AppendVarint(dst, p.CreationTime) },
		decode: func(p *Properties, v []byte) bool {
			x, n := binary.Varint(v)
			p.CreationTime = x
			return n > 0 && n == len(v)
		},
	},
	uintProp("vigil.data.size", func(p *Properties) *uint64 { return &p.DataSize }),
	{
		name:     "vigil.external",
		optional: true,
		present:  func(p *Properties) bool { return p.External },
		encode:   func(p *Properties, dst []byte) []byte { return binary.AppendUvarint(dst, 1) },
		decode: func(p *Properties, v []byte) bool {
			x, n := binary.Uvarint(v)
			p.External = x == 1
			return n > 0 && n == len(v) && x == 1
		},
	},
	uintProp("vigil.file.checksum", func(p *Properties) *uint64 { return &p.FileChecksum }),
	{
		name:     "vigil.filter.prefix",
		optional: true,
		present:  func(p *Properties) bool { return p.PrefixFilter },
		encode:   func(p *Properties, dst []byte) []byte { return binary.AppendUvarint(dst, 1) },
		decode: func(p *Properties, v []byte) bool {
			x, n := binary.Uvarint(v)
			p.PrefixFilter = x == 1
			return n > 0 && n == len(v) && x == 1
		},
	},
	uintProp("vigil.filter.size", func(p *Properties) *uint64 { return &p.FilterSize }),
	{
		name:     "vigil.identity",
		optional: true,
		present:  func(p *Properties) bool { return !p.Identity.IsZero() },
		encode:   func(p *Properties, dst []byte) []byte { return p.Identity.Append(dst) },
		decode: func(p *Properties, v []byte) bool {
			id, ok := base.DecodeTableIdentity(v)
			p.Identity = id
			return ok && !id.IsZero()
		},
	},
	uintProp("vigil.index.size", func(p *Properties) *uint64 { return &p.IndexSize }),
	keyProp("vigil.largest.key", func(p *Properties) *InternalKey { return &p.LargestKey }),
	uintProp("vigil.largest.seqnum", func(p *Properties) *uint64 { return &p.LargestSeq }),
	uintProp("vigil.num.data.blocks", func(p *Properties) *uint64 { return &p.NumDataBlocks }),
	uintProp("vigil.num.deletions", func(p *Properties) *uint64 { return &p.NumDeletions }),
	uintProp("vigil.num.entries", func(p *Properties) *uint64 { return &p.NumEntries }),
	uintProp("vigil.num.range.deletions", func(p *Properties) *uint64 { return &p.NumRangeDels }),
	uintProp("vigil.range.del.size", func(p *Properties) *uint64 { return &p.RangeDelSize }),
	uintProp("vigil.raw.key.size", func(p *Properties) *uint64 { return &p.RawKeySize }),
	uintProp("vigil.raw.value.size", func(p *Properties) *uint64 { return &p.RawValueSize }),
	keyProp("vigil.smallest.key", func(p *Properties) *InternalKey { return &p.SmallestKey }),
	uintProp("vigil.smallest.seqnum", func(p *Properties) *uint64 { return &p.SmallestSeq }),
}

// encodeProperties returns the properties block.
func encodeProperties(p *Properties) []byte {
	var bw blockWriter
	bw.init(DefaultBlockRestartInterval)
	var v []byte
	for i := range propFields {
		if propFields[i].optional && !propFields[i].present(p) {
			continue
		}
		v = propFields[i].encode(p, v[:0])
		bw.add([]byte(propFields[i].name), v)
	}
	return bw.finish()
}

// decodeProperties parses a properties block: every known property exactly
// once (optional ones at most once), in order, no others.
func decodeProperties(b []byte) (Properties, error) {
	var p Properties
	var it blockIter
	if err := it.init(b, false); err != nil {
		return p, err
	}
	i, presentKeys := 0, 0
	for ok := it.first(); ok; ok = it.next() {
		for i < len(propFields) && propFields[i].optional && string(it.key) != propFields[i].name {
			i++
		}
		if i >= len(propFields) || string(it.key) != propFields[i].name {
			return p, blockError(fmt.Sprintf("unexpected property %q", truncate(it.key)))
		}
		if propFields[i].isKey && len(it.val) > 0 {
			presentKeys++
		}
		if !propFields[i].decode(&p, it.val) {
			return p, blockError(fmt.Sprintf("bad value for property %s", propFields[i].name))
		}
		i++
	}
	if it.err != nil {
		return p, it.err
	}
	for i < len(propFields) && propFields[i].optional {
		i++
	}
	if i != len(propFields) {
		return p, blockError(fmt.Sprintf("missing property %s", propFields[i].name))
	}
	// The bounds are stored iff the table has entries.
	if p.empty() && presentKeys != 0 || !p.empty() && presentKeys != 2 {
		return p, blockError("smallest/largest key properties do not match the entry counts")
	}
	if p.ComparerName == "" {
		// Not stored: the default's (see Properties.ComparerName).
		p.ComparerName = base.BytewiseComparerName
	}
	return p, nil
}

// empty reports whether the table has neither point entries nor tombstones.
func (p *Properties) empty() bool { return p.NumEntries == 0 && p.NumRangeDels == 0 }

func truncate(b []byte) string {
	if len(b) > 64 {
		return string(b[:64]) + "..."
	}
	return string(b)
}

// String renders every property, one per line, for tools (vigil sst dump)
// and logs.
func (p *Properties) String() string {
	var b strings.Builder
	line := func(name string, format string, args ...any) {
		fmt.Fprintf(&b, "%-24s "+format+"\n", append([]any{name + ":"}, args...)...)
	}
	line("format version", "%d", p.FormatVersion)
	line("checksum type", "%s (%d)", p.ChecksumType, p.ChecksumType.Code())
	line("compression", "%s", p.Compression)
	line("creation time", "%d (%s)", p.CreationTime, time.Unix(p.CreationTime, 0).UTC().Format(time.RFC3339))
	line("file checksum", "0x%016x", p.FileChecksum)
	line("identity", "%s", p.Identity)
	line("entries", "%d", p.NumEntries)
	line("deletions", "%d", p.NumDeletions)
	line("range deletions", "%d", p.NumRangeDels)
	line("raw key size", "%d", p.RawKeySize)
	line("raw value size", "%d", p.RawValueSize)
	line("data blocks", "%d", p.NumDataBlocks)
	line("data size", "%d", p.DataSize)
	line("index size", "%d", p.IndexSize)
	line("filter size", "%d", p.FilterSize)
	line("range-del size", "%d", p.RangeDelSize)
	line("smallest key", "%s", p.SmallestKey)
	line("largest key", "%s", p.LargestKey)
	line("smallest seqnum", "%d", p.SmallestSeq)
	line("largest seqnum", "%d", p.LargestSeq)
	line("bloom bits per key", "%d", p.BloomBitsPerKey)
	line("block size", "%d", p.BlockSize)
	line("block restart interval", "%d", p.BlockRestartInterval)
	if p.External {
		line("external", "true (entries at seqnum 0; the DB gives them a global seqnum)")
	}
	// Only what differs from the default, so that the rendering of a
	// bytewise table is what it was before comparers.
	if p.ComparerName != "" && p.ComparerName != base.BytewiseComparerName {
		line("comparer", "%q", p.ComparerName)
	}
	if p.PrefixFilter {
		line("prefix filter", "true (the filter holds the keys' prefixes)")
	}
	return b.String()
}
