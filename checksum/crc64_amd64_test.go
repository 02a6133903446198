//go:build amd64 && !purego

package checksum

import "testing"

// TestCPUID checks the CPUID stub's register mapping with facts true of
// every amd64 CPU: leaf 0 returns a printable 12-byte vendor string in
// EBX, EDX, ECX, and leaf 1 reports SSE2 (EDX bit 26).
func TestCPUID(t *testing.T) {
	maxLeaf, b, c, d := cpuid(0, 0)
	if maxLeaf < 1 {
		t.Fatalf("max leaf %d", maxLeaf)
	}
	var vendor []byte
	for _, r := range []uint32{b, d, c} {
		vendor = append(vendor, byte(r), byte(r>>8), byte(r>>16), byte(r>>24))
	}
	for _, ch := range vendor {
		if ch < 0x20 || ch > 0x7e {
			t.Fatalf("vendor string %q is not printable", vendor)
		}
	}
	_, _, _, edx := cpuid(1, 0)
	if edx&(1<<26) == 0 {
		t.Fatalf("CPUID.1:EDX = %#x lacks SSE2", edx)
	}
	t.Logf("vendor %s, PCLMULQDQ+SSE4.1: %v", vendor, hasCLMUL())
}
