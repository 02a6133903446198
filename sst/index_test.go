package sst

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/vigildb/vigil/internal/base"
)

// TestIndexEntryLayout checks that decodeIndex accepts only the entry
// layout indexBlock.entry reads without error paths: a shared length 0 in
// one byte (a longer encoding of 0 is refused), and unshared and value
// lengths in either one byte or more.
func TestIndexEntryLayout(t *testing.T) {
	sep := func(uk string) []byte { return base.MakeInternalKey([]byte(uk), 1, base.KindSet).Append(nil) }
	long := strings.Repeat("k", 200) // a two-byte unshared length
	var b []byte
	var restarts []uint32
	add := func(sharedEnc []byte, key []byte, h handle) {
		restarts = append(restarts, uint32(len(b)))
		b = append(b, sharedEnc...)
		b = binary.AppendUvarint(b, uint64(len(key)))
		v := appendHandle(nil, h)
		b = binary.AppendUvarint(b, uint64(len(v)))
		b = append(append(b, key...), v...)
	}
	add([]byte{0}, sep("a"), handle{0, 100})
	add([]byte{0}, sep(long), handle{105, 300})
	block := finishRawBlock(b, restarts...)
	fr := fileReader{fid: fileID{name: "t.sst"}, size: 1 << 20, cmp: base.DefaultComparer}
	x, end, err := fr.decodeIndex(block, 1000)
	if err != nil || end != 410 {
		t.Fatalf("decodeIndex = %v, end %d", err, end)
	}
	if x.len() != 2 || string(x.sepUser(1)) != long || x.handle(1) != (handle{105, 300}) || !bytes.Equal(x.sep(0), sep("a")) {
		t.Fatalf("entries: %d, %q, %v, %x", x.len(), x.sepUser(1), x.handle(1), x.sep(0))
	}
	if got := x.search([]byte("b"), 0); got != 1 {
		t.Fatalf("search(b) = %d, want 1", got)
	}

	b, restarts = nil, nil
	add([]byte{0x80, 0x00}, sep("a"), handle{0, 100}) // 0 in two bytes
	if _, _, err := fr.decodeIndex(finishRawBlock(b, restarts...), 1000); !errors.Is(err, base.ErrCorruption) || !strings.Contains(err.Error(), "more than one byte") {
		t.Fatalf("a two-byte shared length 0: %v", err)
	}
}
