package sst

import (
	"github.com/vigildb/vigil/checksum"
)

// trailerChecksum returns checksum.Block(t, b[:len(b)-1], b[len(b)-1]): the
// checksum of a block followed by its compression byte, which callers keep
// contiguous in one buffer. b must not be empty.
func trailerChecksum(t checksum.Type, b []byte) uint32 {
	n := len(b) - 1
	return checksum.Block(t, b[:n], b[n])
}

// fileHasher computes checksum.Sum64(t, data) over data fed in pieces, for
// the whole-file checksum the writer computes while it writes and Verify
// while it reads. It is checksum.Digest, without allocation per write.
type fileHasher struct{ d checksum.Digest }

func newFileHasher(t checksum.Type) *fileHasher {
	h := &fileHasher{}
	h.d.Reset(t)
	return h
}

func (h *fileHasher) write(p []byte) { h.d.Write(p) }

func (h *fileHasher) sum64() uint64 { return h.d.Sum64() }
