package testcmp

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/vigildb/vigil/internal/base"
)

// TestComparerContracts checks, over random keys, what the engine relies on
// of every comparer: a total order, abbreviations that never contradict
// it, separators between their arguments, successors not below theirs, and
// prefixes that are contiguous in the order.
func TestComparerContracts(t *testing.T) {
	for _, c := range []*base.Comparer{base.DefaultComparer, Reverse, Versioned} {
		t.Run(c.Name, func(t *testing.T) {
			r := c.Resolve()
			rng := rand.New(rand.NewPCG(1, 2))
			keys := make([][]byte, 600)
			for i := range keys {
				k := make([]byte, rng.IntN(14))
				for j := range k {
					k[j] = "ab\x00\xff"[rng.IntN(4)]
				}
				keys[i] = k
			}
			slices.SortFunc(keys, r.Compare)
			for i := 1; i < len(keys); i++ {
				a, b := keys[i-1], keys[i]
				if r.Compare(b, a) < 0 || (r.Compare(a, b) == 0) != r.Equal(a, b) || r.Cmp(a, b) != r.Compare(a, b) {
					t.Fatalf("%q, %q: inconsistent order", a, b)
				}
				if r.AbbreviatedKey != nil && r.AbbreviatedKey(a) > r.AbbreviatedKey(b) {
					t.Fatalf("abbreviations of %q < %q disagree", a, b)
				}
				if r.Compare(a, b) < 0 {
					s := r.Separator(nil, a, b)
					if r.Compare(a, s) > 0 || r.Compare(s, b) >= 0 {
						t.Fatalf("Separator(%q, %q) = %q not in [a, b)", a, b, s)
					}
				}
				if s := r.Successor(nil, a); r.Compare(s, a) < 0 {
					t.Fatalf("Successor(%q) = %q < a", a, s)
				}
			}
			if r.Split == nil {
				return
			}
			// Keys of one prefix are contiguous: once the prefix changes it
			// never comes back, and prefixes ascend as the keys do.
			seen := map[string]bool{}
			for i, k := range keys {
				p := string(r.Prefix(k))
				if r.Compare([]byte(p), k) > 0 {
					t.Fatalf("prefix %q sorts after its key %q", p, k)
				}
				if i > 0 && p != string(r.Prefix(keys[i-1])) {
					if seen[p] {
						t.Fatalf("prefix %q not contiguous", p)
					}
					if r.Compare(r.Prefix(keys[i-1]), []byte(p)) >= 0 {
						t.Fatalf("prefixes out of order at %q", k)
					}
				}
				seen[p] = true
			}
		})
	}
}

func TestResolve(t *testing.T) {
	if base.DefaultComparer.Resolve() != base.DefaultComparer || (*base.Comparer)(nil).Resolve() != base.DefaultComparer {
		t.Fatal("the default does not resolve to itself")
	}
	cp := *base.DefaultComparer
	if !cp.Resolve().IsBytewise() {
		t.Fatal("a copy of the default is not taken for bytewise")
	}
	cp.Compare = Reverse.Compare
	if cp.Resolve().IsBytewise() {
		t.Fatal("a copy with another Compare is taken for bytewise")
	}
	if Reverse.Resolve().IsBytewise() {
		t.Fatal("Reverse taken for bytewise")
	}
	for _, c := range []*base.Comparer{{Name: "x"}, {Compare: Reverse.Compare}, {}} {
		if c.Check() == "" {
			t.Fatalf("%+v passes Check", c)
		}
	}
	if base.DefaultComparer.Check() != "" || Versioned.Check() != "" {
		t.Fatal("a good comparer fails Check")
	}
}

func TestBytewiseSeparator(t *testing.T) {
	for _, tc := range []struct{ a, b, want string }{
		{"abc", "abe", "abd"},
		{"abc", "abd", "abc"},
		{"abc", "abdz", "abd"},
		{"ab", "abc", "ab"},
		{"a\xff", "b", "a\xff"},
		{"a\xffz", "b", "a\xffz"},
		{"", "a", ""},
	} {
		if got := string(base.BytewiseSeparator(nil, []byte(tc.a), []byte(tc.b))); got != tc.want {
			t.Errorf("BytewiseSeparator(%q, %q) = %q, want %q", tc.a, tc.b, got, tc.want)
		}
	}
	for _, tc := range []struct{ a, want string }{{"abc", "b"}, {"\xff\xffa", "\xff\xffb"}, {"\xff", "\xff"}, {"", ""}} {
		if got := string(base.BytewiseSuccessor(nil, []byte(tc.a))); got != tc.want {
			t.Errorf("BytewiseSuccessor(%q) = %q, want %q", tc.a, got, tc.want)
		}
	}
}
