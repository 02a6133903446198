package sst

import (
	"sync"

	"github.com/klauspost/compress/zstd"
)

// zstd blocks: a single zstd frame (github.com/klauspost/compress/zstd, pure
// Go) per block, with its content size in the frame header and no frame
// checksum (the block trailer's checksum covers the frame). The reader
// learns the decoded size from the header before it allocates, and refuses
// a size above MaxBlockSize or maxZstdExpansion times the frame's length; a
// writer stores a block that compresses better than that uncompressed.

// maxZstdExpansion bounds the decoded size of a zstd block per stored byte,
// so that a damaged frame header cannot make a reader allocate more than a
// small multiple of what it read. Real blocks stay far below (text and
// keys compress 3-10×); a block that would exceed it (a long run of one byte) is
// stored uncompressed.
const maxZstdExpansion = 128

// DefaultZstdLevel is the zstd level a zero WriterOptions.ZstdLevel means:
// zstd's own default, 3.
const DefaultZstdLevel = 3

// MaxZstdLevel is the highest zstd level (zstd's scale, 1-22; the encoder
// maps it to its four speeds: 1 fastest, 2-4 default, 5-8 better, 9+ best).
const MaxZstdLevel = 22

// zstdEncoders are reusable encoders per encoder speed. An encoder is used
// by one writer at a time (EncodeAll is safe for concurrent use, but one
// encoder per goroutine avoids its internal locking).
var zstdEncoders [zstd.SpeedBestCompression + 1]sync.Pool

func zstdEncoder(level int) *zstd.Encoder {
	if level == 0 {
		level = DefaultZstdLevel
	}
	speed := zstd.EncoderLevelFromZstd(level)
	if e, ok := zstdEncoders[speed].Get().(*zstd.Encoder); ok {
		return e
	}
	// Options that cannot fail: a known level, one goroutine, no CRC.
	e, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(speed), zstd.WithEncoderConcurrency(1),
		zstd.WithEncoderCRC(false), zstd.WithZeroFrames(true), zstd.WithSingleSegment(true))
	if err != nil {
		panic("sst: zstd encoder: " + err.Error())
	}
	return e
}

func putZstdEncoder(level int, e *zstd.Encoder) {
	if level == 0 {
		level = DefaultZstdLevel
	}
	zstdEncoders[zstd.EncoderLevelFromZstd(level)].Put(e)
}

// zstdDecoder decodes every zstd block: DecodeAll is safe for concurrent
// use. It decodes at most cap(dst) bytes (WithDecodeAllCapLimit): the
// size decodedLen checked, so that bytes after the frame (a second frame,
// or damage) cannot make it allocate past that.
var zstdDecoder = sync.OnceValue(func() *zstd.Decoder {
	d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecoderMaxMemory(MaxBlockSize),
		zstd.WithDecodeAllCapLimit(true), zstd.IgnoreChecksum(true))
	if err != nil {
		panic("sst: zstd decoder: " + err.Error())
	}
	return d
})

// zstdDecodedLen returns the content size that frame b declares, or ok
// false if b is not a single-segment zstd frame (what the writer makes: its
// window is its content) with a content size within bounds.
func zstdDecodedLen(b []byte) (n int, ok bool) {
	var h zstd.Header
	if err := h.Decode(b); err != nil || !h.HasFCS || !h.SingleSegment || h.Skippable {
		return 0, false
	}
	if h.FrameContentSize > MaxBlockSize || h.FrameContentSize > uint64(maxZstdExpansion)*uint64(len(b)) {
		return 0, false
	}
	return int(h.FrameContentSize), true
}
