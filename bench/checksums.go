package bench

import (
	"bytes"
	"fmt"
	"runtime"
	"time"

	"github.com/vigildb/vigil/checksum"
)

// ChecksumBenchmarks maps the db_bench benchmark names of the checksum
// micro-benchmarks to the function each one times. Like db_bench, each op
// hashes one block of --block_size bytes of 'x'.
var ChecksumBenchmarks = map[string]func([]byte) uint64{
	"crc32c":   func(p []byte) uint64 { return checksum.Sum64(checksum.CRC32c, p) },
	"xxhash":   func(p []byte) uint64 { return checksum.Sum64(checksum.XXHash, p) },
	"xxhash64": func(p []byte) uint64 { return checksum.Sum64(checksum.XXHash64, p) },
	"xxh3":     func(p []byte) uint64 { return checksum.Sum64(checksum.XXH3, p) },
	"crc64":    func(p []byte) uint64 { return checksum.Sum64(checksum.CRC64, p) },
}

// DefaultChecksumBytes is how much data a checksum benchmark hashes when
// neither --num nor --duration limits it: about 5 GB, like db_bench.
const DefaultChecksumBytes = 5000 << 20

// RunChecksum hashes blockSize-byte blocks until totalBytes are processed, or
// until ops blocks are hashed when ops > 0, or until duration passes when it
// is > 0 — whichever limit is given (ops, then duration, then bytes).
func RunChecksum(name string, blockSize int, ops int64, duration time.Duration, totalBytes int64) (Result, error) {
	fn, ok := ChecksumBenchmarks[name]
	if !ok {
		return Result{}, fmt.Errorf("unknown checksum benchmark %q", name)
	}
	if blockSize <= 0 {
		return Result{}, fmt.Errorf("block size %d must be positive", blockSize)
	}
	data := bytes.Repeat([]byte{'x'}, blockSize)
	limitOps := ops
	if limitOps <= 0 && duration <= 0 {
		if totalBytes <= 0 {
			totalBytes = DefaultChecksumBytes
		}
		limitOps = (totalBytes + int64(blockSize) - 1) / int64(blockSize)
	}
	var sink uint64
	var done int64
	start := time.Now()
	deadline := start.Add(duration)
	for {
		// Check the clock every 1024 ops so time.Now stays out of the figures.
		for i := 0; i < 1024; i++ {
			sink += fn(data)
			done++
			if limitOps > 0 && done >= limitOps {
				break
			}
		}
		if limitOps > 0 && done >= limitOps {
			break
		}
		if limitOps <= 0 && !time.Now().Before(deadline) {
			break
		}
	}
	elapsed := time.Since(start)
	runtime.KeepAlive(sink) // the hashing must not be optimised away
	return Result{
		Name:    name,
		Ops:     done,
		Bytes:   done * int64(blockSize),
		Elapsed: elapsed,
		Busy:    elapsed,
		Message: fmt.Sprintf("(%d per op)", blockSize),
	}, nil
}
