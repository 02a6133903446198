package sst

import (
	"fmt"

	"github.com/vigildb/vigil/internal/base"
)

// BlockKind says what a block holds; it appears in error messages and in
// Layout.
type BlockKind uint8

// The kinds of blocks in a table, in file order.
const (
	BlockKindData BlockKind = iota
	BlockKindFilter
	BlockKindRangeDel
	BlockKindProperties
	BlockKindIndex
	BlockKindMetaIndex
	BlockKindFooter // not a block: the fixed-size footer, listed by Layout
)

var blockKindNames = [...]string{"data", "filter", "range-del", "properties", "index", "metaindex", "footer"}

// String returns the kind's name ("data", "index", ...).
func (k BlockKind) String() string {
	if int(k) < len(blockKindNames) {
		return blockKindNames[k]
	}
	return fmt.Sprintf("BlockKind(%d)", uint8(k))
}

// fileID names a table in error messages.
type fileID struct {
	name string
	num  uint64
}

func (f fileID) String() string {
	if f.name == "" {
		return fmt.Sprintf("file %06d", f.num)
	}
	return fmt.Sprintf("%s (file %06d)", f.name, f.num)
}

// blockCorruptf returns a corruption error naming the file, the block's kind
// and offset.
func blockCorruptf(f fileID, kind BlockKind, off uint64, format string, args ...any) error {
	return base.CorruptionErrorf("sst: %s in %s, %s block at offset %d", fmt.Sprintf(format, args...), f, kind, off)
}

func invalidArgf(format string, args ...any) error {
	return base.InvalidArgumentErrorf("sst: "+format, args...)
}
