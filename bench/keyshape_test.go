package bench

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestKeyShapeGolden pins a few keys of every shape: the shapes are part of
// what a benchmark figure means, so they must not drift. hashed's first 8
// bytes after the 'h' are splitmix64's well-known first output for seed 0.
func TestKeyShapeGolden(t *testing.T) {
	for _, tc := range []struct {
		shape KeyShape
		v     uint64
		want  string
	}{
		{KeyDBBench, 0x0102, "\x00\x00\x00\x00\x00\x00\x01\x0200000000"},
		{KeyDBBench, 999999, "\x00\x00\x00\x00\x00\x0fB?00000000"},
		{KeyDecimal, 0, "0000000000000000"},
		{KeyDecimal, 42, "0000000000000042"},
		{KeyDecimal, 1099511627776, "0001099511627776"},
		{KeyDecimal, 12345678901234567890, "12345678901234567890"},
		{KeyPrefixed, 0, "/tbl/0053/1/\x00\x00\x00\x00\x00\x00\x00\x00"},
		{KeyPrefixed, 999999, "/tbl/0053/1/\x00\x00\x00\x00\x00\x0fB?"},
		{KeyHashed, 0, hexString(t, "68e220a8397b1dcdafa706dd2f4d197e6f238275bc38fcbe912130748aaac80268")},
		{KeyHashed, 1, hexString(t, "68910a2dec89025cc15e41ab087439611eb18a02f46d8d86c3e28195ddd9ee4956")},
		{KeyHashed, 42, hexString(t, "68bdd732262feb6e9557e1faba651072046310bf04d8207f46c16129ecd0dc5b93")},
		{KeyVarlen, 0, "user:0:billing_address_p"},
		{KeyVarlen, 1, "user:1:address_nde"},
		{KeyVarlen, 42, "user:42:updated_ikxd"},
		{KeyVarlen, 999999, "user:999999:billing_add"},
		{KeyVarlen, 1099511627776, "user:1099511627776:last_login_f"},
	} {
		if got := NewKeyGen(tc.shape, 16).Key(tc.v); string(got) != tc.want {
			t.Errorf("%s key of %d = %q, want %q", tc.shape, tc.v, got, tc.want)
		}
	}
}

func hexString(t *testing.T, s string) string {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestKeyShapesDistinctAndOrdered: over the first 100k indexes every shape
// gives distinct keys of its stated lengths; dbbench, decimal and prefixed
// keep the index order; the missing keys of every shape are no key.
func TestKeyShapesDistinctAndOrdered(t *testing.T) {
	const n = 100_000
	for s := KeyShape(0); s < numKeyShapes; s++ {
		g := NewKeyGen(s, 16)
		lo, hi := s.KeyLen(16)
		seen := make(map[string]bool, n)
		var prev []byte
		ordered := s == KeyDBBench || s == KeyDecimal || s == KeyPrefixed
		for v := uint64(0); v < n; v++ {
			k := g.Key(v)
			if len(k) < lo || len(k) > hi {
				t.Fatalf("%s: key %d is %d bytes, want %d..%d", s, v, len(k), lo, hi)
			}
			if seen[string(k)] {
				t.Fatalf("%s: key %d (%q) repeats an earlier one", s, v, k)
			}
			seen[string(k)] = true
			if ordered && prev != nil && bytes.Compare(prev, k) >= 0 {
				t.Fatalf("%s: key %d (%q) sorts before key %d (%q)", s, v, k, v-1, prev)
			}
			prev = append(prev[:0], k...)
		}
		for v := uint64(0); v < n; v += 97 {
			if m := g.Missing(v); seen[string(m)] {
				t.Fatalf("%s: missing key of %d (%q) is a key", s, v, m)
			}
		}
	}
}

// TestVarlenLengths: varlen's lengths stay in 10..40 and reach both ends
// within 10k keys, also for the longest indexes.
func TestVarlenLengths(t *testing.T) {
	g := NewKeyGen(KeyVarlen, 16)
	counts := map[int]int{}
	for v := uint64(0); v < 10_000; v++ {
		counts[len(g.Key(v))]++
	}
	if counts[varlenMin] == 0 || counts[varlenMax] == 0 {
		t.Errorf("lengths over 10k keys: %v; want both %d and %d", counts, varlenMin, varlenMax)
	}
	for l := range counts {
		if l < varlenMin || l > varlenMax {
			t.Errorf("key length %d outside %d..%d", l, varlenMin, varlenMax)
		}
	}
	for _, v := range []uint64{1<<64 - 1, 1<<63 + 12345, 10_000_000_000_000_000_000} {
		k := g.Key(v)
		if len(k) > varlenMax || !strings.HasPrefix(string(k), fmt.Sprintf("user:%d:", v)) {
			t.Errorf("key of %d: %q", v, k)
		}
	}
}

// TestDBBenchShapeIsMakeKey: the dbbench shape is MakeKey, byte for byte,
// for every key size, so kvbench's keys stay db_bench's; its missing keys
// are MakeKey's of --key_size+1 bytes, as db_bench's readmissing makes
// them (one more '0', or below 8 bytes one more byte of the index).
func TestDBBenchShapeIsMakeKey(t *testing.T) {
	for _, size := range []int{1, 4, 8, 9, 16, 24, 32, 100} {
		g := NewKeyGen(KeyDBBench, size)
		want := make([]byte, size)
		wantMissing := make([]byte, size+1)
		for _, v := range []uint64{0, 1, 255, 0x0102030405060708, 1<<64 - 1, 999_999} {
			if got := g.Key(v); !bytes.Equal(got, MakeKey(want, v)) {
				t.Errorf("size %d, index %d: %q, MakeKey gives %q", size, v, got, want)
			}
			if got := g.Missing(v); !bytes.Equal(got, MakeKey(wantMissing, v)) {
				t.Errorf("size %d, index %d: missing key %q, want %q", size, v, got, wantMissing)
			}
		}
	}
}

// TestKeyGenDoesNotAllocate: the generators write into their own buffer.
func TestKeyGenDoesNotAllocate(t *testing.T) {
	for s := KeyShape(0); s < numKeyShapes; s++ {
		g := NewKeyGen(s, 16)
		v := uint64(0)
		if a := testing.AllocsPerRun(100, func() { g.Key(v); g.Missing(v); v += 7919 }); a != 0 {
			t.Errorf("%s: %v allocations per key", s, a)
		}
	}
}

func TestParseKeyShape(t *testing.T) {
	for s := KeyShape(0); s < numKeyShapes; s++ {
		if got, err := ParseKeyShape(s.String()); err != nil || got != s {
			t.Errorf("ParseKeyShape(%q) = %v, %v", s.String(), got, err)
		}
	}
	_, err := ParseKeyShape("uuid")
	if err == nil || !strings.Contains(err.Error(), `"uuid"`) || !strings.Contains(err.Error(), strings.Join(KeyShapeNames(), ", ")) {
		t.Errorf("unknown shape: %v", err)
	}
}

// TestKeyShapeFlag: --key_shape reaches the Config; an unknown name is a
// usage error naming the valid ones.
func TestKeyShapeFlag(t *testing.T) {
	if cfg, err := parse(t).Config(); err != nil || cfg.KeyShape != KeyDBBench {
		t.Errorf("default: %v, %v", cfg.KeyShape, err)
	}
	if cfg, err := parse(t, "--key_shape=varlen").Config(); err != nil || cfg.KeyShape != KeyVarlen {
		t.Errorf("--key_shape=varlen: %v, %v", cfg.KeyShape, err)
	}
	_, err := parse(t, "--key_shape=uuid").Config()
	var ue *UsageError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "--key_shape") || !strings.Contains(err.Error(), "hashed") {
		t.Errorf("--key_shape=uuid: %v", err)
	}
}

// TestWorkloadsPerKeyShape runs the workloads on every shape: what fillseq
// wrote is found by readrandom and seekrandom, readmissing finds nothing,
// deleteseq removes every key, and the byte counts are the keys' own
// lengths.
func TestWorkloadsPerKeyShape(t *testing.T) {
	const num = 2000
	for s := KeyShape(0); s < numKeyShapes; s++ {
		t.Run(s.String(), func(t *testing.T) {
			out := runKV(t, "--benchmarks=fillseq,readrandom,readmissing,seekrandom,overwrite,deleteseq,readrandom",
				fmt.Sprint("--num=", num), "--seed=3", "--key_shape="+s.String())
			checkAgainstDBBench(t, out, []string{
				"fillseq 2000",
				"readrandom 2000 (2000 of 2000 found)",
				"readmissing 2000 (0 of 2000 found)",
				"seekrandom 2000 (2000 of 2000 found)",
				"overwrite 2000",
				"deleteseq 2000",
				"readrandom 2000 (0 of 2000 found)",
			})
			if s != KeyDBBench && !strings.Contains(out, "shape "+s.String()) {
				t.Errorf("header does not name the shape:\n%s", out)
			}
			g := NewKeyGen(s, 16)
			var want int64
			for v := uint64(0); v < num; v++ {
				want += int64(len(g.Key(v))) + 100
			}
			r := NewRunner(Config{Benchmarks: "fillseq", Num: num, Reads: -1, Writes: -1, KeyShape: s, ValueSize: 100,
				Seed: 3, DB: t.TempDir(), Stdout: &bytes.Buffer{}, Stderr: &bytes.Buffer{}, BlockSize: 4096})
			if err := r.Run(); err != nil {
				t.Fatal(err)
			}
			if got := r.Results()[0].Bytes; got != want {
				t.Errorf("fillseq counted %d bytes, want %d", got, want)
			}
		})
	}
}
