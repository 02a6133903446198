//go:build linux

package manual

import (
	"bufio"
	"fmt"
	"os"
	"strings"
	"testing"
	"unsafe"
)

// TestLargeAllocHugePages checks that a memtable-sized buffer is mapped
// eligible for transparent huge pages and a small one is not: random
// inserts into a 64 MiB arena of 4 KiB pages miss the TLB on nearly every
// node they visit. It reads the kernel's own verdict (THPeligible in
// /proc/self/smaps) and skips where the kernel has huge pages off.
func TestLargeAllocHugePages(t *testing.T) {
	mode, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	if err != nil || strings.Contains(string(mode), "[never]") {
		t.Skipf("transparent huge pages unavailable (%q, %v)", mode, err)
	}
	big := Alloc(16 << 20)
	defer Free(big)
	small := Alloc(hugeMin / 2)
	defer Free(small)
	for _, c := range []struct {
		name string
		b    []byte
		want bool
	}{{"16 MiB", big, true}, {"2 MiB", small, strings.Contains(string(mode), "[always]")}} {
		got, err := thpEligible(uintptr(unsafe.Pointer(&c.b[0])))
		if err != nil {
			t.Fatal(err)
		}
		if got != c.want {
			t.Errorf("%s buffer: THPeligible %v, want %v (THP mode %q)", c.name, got, c.want, strings.TrimSpace(string(mode)))
		}
	}
}

// thpEligible reports the THPeligible field of the mapping holding addr.
func thpEligible(addr uintptr) (bool, error) {
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return false, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	in := false
	for sc.Scan() {
		line := sc.Text()
		fields := strings.Fields(line)
		if len(fields) > 0 && !strings.HasSuffix(fields[0], ":") {
			// A mapping's header: "lo-hi perms offset dev inode [path]".
			var lo, hi uintptr
			if _, err := fmt.Sscanf(fields[0], "%x-%x", &lo, &hi); err != nil {
				return false, fmt.Errorf("smaps header %q: %v", line, err)
			}
			in = lo <= addr && addr < hi
			continue
		}
		if in && strings.HasPrefix(line, "THPeligible:") {
			return strings.TrimSpace(strings.TrimPrefix(line, "THPeligible:")) == "1", nil
		}
	}
	if err := sc.Err(); err != nil {
		return false, err
	}
	return false, fmt.Errorf("no THPeligible line for the mapping of %#x in /proc/self/smaps", addr)
}

// TestSpareReuse checks that a freed small buffer's range comes back from
// Alloc zeroed, its pages dropped, instead of a new mapping; that a buffer
// large enough for huge pages is unmapped; and that spares keeps no more
// than spareMax of address space.
func TestSpareReuse(t *testing.T) {
	if invariantsEnabled {
		t.Skip("invariants builds protect freed buffers instead of reusing them")
	}
	const n = 100 << 10
	b := Alloc(n)
	if !mapped.contains(uintptr(unsafe.Pointer(&b[0]))) {
		Free(b)
		t.Skip("Alloc falls back to the Go heap here")
	}
	for i := range b {
		b[i] = 0xa5
	}
	p := &b[0]
	Free(b)
	c := Alloc(n - 100) // the same whole pages
	if &c[0] != p {
		t.Fatalf("Alloc after Free mapped a new range (%p, freed %p)", &c[0], p)
	}
	for i, v := range c {
		if v != 0 {
			t.Fatalf("reused range: byte %d = %#x, not zeroed", i, v)
		}
	}
	Free(c)

	big := Alloc(hugeMin)
	Free(big)
	spares.mu.Lock()
	kept := len(spares.free[spareLen(hugeMin)])
	spares.mu.Unlock()
	if kept != 0 {
		t.Errorf("a %d-byte buffer was kept for reuse; huge-page buffers must be unmapped", hugeMin)
	}

	// Free more than spareMax: what spares keeps stays within it.
	var bufs [][]byte
	for range spareMax/(1<<20) + 8 {
		bufs = append(bufs, Alloc(1<<20))
	}
	for _, b := range bufs {
		Free(b)
	}
	spares.mu.Lock()
	held := spares.bytes
	spares.mu.Unlock()
	if held > spareMax {
		t.Errorf("spares holds %d bytes of address space, more than spareMax %d", held, spareMax)
	}
	if held < spareMax-(1<<20) {
		t.Errorf("spares holds %d bytes after freeing %d MiB; want it (nearly) full at %d", held, len(bufs), spareMax)
	}
}

// TestDroppingAllocatorReturnsPages: a dropping allocator's Free returns
// the whole pages inside the slot (no longer resident, by mincore), keeps
// the bytes outside them, and the slot's next user reads zeroes there. An
// ordinary allocator keeps the pages, for the next buffer of the class.
func TestDroppingAllocatorReturnsPages(t *testing.T) {
	if invariantsEnabled {
		t.Skip("invariants builds poison and protect freed slots instead")
	}
	const n = 6 * 4096 // a 6144-byte step class: slots not page-aligned
	for _, dropping := range []bool{false, true} {
		a := NewAllocator()
		if dropping {
			a = NewDroppingAllocator()
		}
		keep := a.Alloc(n) // keeps the chunk partly used, so it stays mapped
		b := a.Alloc(n)
		p := b.Bytes()
		for i := range p {
			p[i] = 0xAB
		}
		if r := residentPages(t, p); r != len(p)/pageSize && r != len(p)/pageSize+1 {
			t.Fatalf("dropping=%v: %d pages resident after writing the buffer", dropping, r)
		}
		b.Free()
		switch r := residentPages(t, p); {
		case dropping && r > 2: // at most the partial pages at either end
			t.Fatalf("dropping: %d pages still resident after Free", r)
		case !dropping && r < len(p)/pageSize:
			t.Fatalf("ordinary: %d pages resident after Free, want all", r)
		}
		b = a.Alloc(n)
		if &b.Bytes()[0] != &p[0] {
			t.Fatalf("dropping=%v: the freed slot was not reused", dropping)
		}
		var zeroes int
		for _, x := range b.Bytes() {
			if x == 0 {
				zeroes++
			}
		}
		if want := 0; dropping {
			want = len(p) - 2*pageSize // the whole pages at least
			if zeroes < want {
				t.Fatalf("dropping: %d zero bytes in the reused slot, want >= %d", zeroes, want)
			}
		} else if zeroes != want {
			t.Fatalf("ordinary: %d zero bytes in the reused slot, want the old contents", zeroes)
		}
		b.Free()
		keep.Free()
		a.ReleaseSpares()
	}
}

// residentPages counts b's pages in memory, the partial pages at its ends
// included.
func residentPages(t *testing.T, b []byte) int {
	t.Helper()
	lead := int(uintptr(unsafe.Pointer(&b[0])) & uintptr(pageSize-1))
	span := unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(&b[0]), -lead)), lead+len(b))
	n := 0
	for _, in := range resident(t, span) {
		if in {
			n++
		}
	}
	return n
}
