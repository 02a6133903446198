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
