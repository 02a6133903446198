package vigil

import (
	"encoding/binary"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/vigildb/vigil/checksum"
)

// Every set of pairs over a small universe rich in zero bytes (empty keys
// and values, keys and values of one or many zero bytes) has its own
// Checksum, and digests compose at every split point, with the empty range
// as the identity. The old encoding fails this at once: {"":""} and {} both
// gave 0, and {"":""} ∪ S the same CRC as S.
func TestRangeDigestEncodingInjective(t *testing.T) {
	zeros := func(n int) string { return strings.Repeat("\x00", n) }
	keys := []string{"", "\x00", "\x00\x00", zeros(70), "a"}
	sort.Strings(keys)
	values := []string{"", "\x00", zeros(130), "\x01\x00"}
	type pair struct{ k, v []byte }
	digestOf := func(ps []pair) RangeDigest {
		var g RangeDigest
		for _, p := range ps {
			g.add(p.k, p.v)
		}
		return g
	}
	seen := map[uint64]string{}
	// Each key is absent (choice 0) or has values[choice-1].
	choices := make([]int, len(keys))
	for {
		var ps []pair
		var desc strings.Builder
		for i, c := range choices {
			if c > 0 {
				ps = append(ps, pair{[]byte(keys[i]), []byte(values[c-1])})
				fmt.Fprintf(&desc, "%q:%q ", keys[i], values[c-1])
			}
		}
		whole := digestOf(ps)
		if whole.Keys != int64(len(ps)) {
			t.Fatalf("{%s}: %d keys", desc.String(), whole.Keys)
		}
		if prev, ok := seen[whole.CRC64]; ok {
			t.Fatalf("{%s} and {%s} have the same checksum %#x", prev, desc.String(), whole.CRC64)
		}
		seen[whole.CRC64] = desc.String()
		for i := 0; i <= len(ps); i++ {
			if got := digestOf(ps[:i]).Append(digestOf(ps[i:])); got != whole {
				t.Fatalf("{%s} split at %d: composed %+v, whole %+v", desc.String(), i, got, whole)
			}
		}
		if (RangeDigest{}).Append(whole) != whole || whole.Append(RangeDigest{}) != whole {
			t.Fatalf("{%s}: the empty range is not the identity of Append", desc.String())
		}
		// Next state (odometer).
		i := 0
		for ; i < len(choices); i++ {
			if choices[i]++; choices[i] <= len(values) {
				break
			}
			choices[i] = 0
		}
		if i == len(choices) {
			break
		}
	}
	if len(seen) != 625*5 {
		t.Fatalf("%d states", len(seen))
	}
	// Every pair's encoding is 0x01 ‖ uvarint(len(k)) ‖ k ‖ uvarint(len(v)) ‖ v,
	// and no pair on its own has the empty range's checksum.
	for _, k := range keys {
		for _, v := range values {
			var g RangeDigest
			g.add([]byte(k), []byte(v))
			enc := append([]byte{1}, binary.AppendUvarint(nil, uint64(len(k)))...)
			enc = append(append(enc, k...), binary.AppendUvarint(nil, uint64(len(v)))...)
			enc = append(enc, v...)
			if g != (RangeDigest{CRC64: checksum.UpdateCRC64(0, enc), Bytes: int64(len(enc)), Keys: 1}) || g.CRC64 == 0 {
				t.Fatalf("pair %q:%q: %+v, want the CRC of %x", k, v, g, enc)
			}
		}
	}
}
