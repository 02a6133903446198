//go:build linux

package manual

import "golang.org/x/sys/unix"

// hugeMin is the smallest buffer osAlloc asks transparent huge pages for
// (madvise MADV_HUGEPAGE; most distributions enable them only on request).
// Why: a memtable arena is read at random, one node per skiplist step; with
// 4 KiB pages a 64 MiB arena spans 16k pages, far more than the TLB holds,
// so a random insert paid a TLB miss on top of the cache miss at nearly
// every step. With 2 MiB pages the arena is 32 TLB entries. The cost is
// memory: the page at the arena's fill point is backed whole, at most
// 2 MiB more per arena being filled (arenas are filled from the start).
// Smaller buffers (and the block cache's 1 MiB slab chunks, which free
// slots back to the OS page by page) keep 4 KiB pages.
const hugeMin = 4 << 20

// adviseHuge asks for transparent huge pages for b. Best effort: a kernel
// without them says no, and b works the same with small pages.
func adviseHuge(b []byte) { _ = unix.Madvise(b, unix.MADV_HUGEPAGE) }
