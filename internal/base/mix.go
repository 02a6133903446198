package base

// Fmix64 is MurmurHash3's 64-bit finalizer: a bijection (xor-shifts and
// odd multiplications, each invertible), so distinct inputs give distinct
// outputs, and every input bit affects every output bit. The memtable's
// per-entry checksum (checksum.KV) finishes with it, and the block cache
// spreads its keys over shards and slots with it.
func Fmix64(k uint64) uint64 {
	k ^= k >> 33
	k *= 0xff51afd7ed558ccd
	k ^= k >> 33
	k *= 0xc4ceb9fe1a85ec53
	k ^= k >> 33
	return k
}
