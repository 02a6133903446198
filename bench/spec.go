package bench

import (
	"fmt"
	"strconv"
	"strings"
)

// Spec is one entry of --benchmarks: a name plus db_bench's bracketed
// arguments, e.g. "readseq[-X10]" (repeat 10 times, report average and
// median) or "readrandom[-W1-X5]" (one warm-up run, then five).
type Spec struct {
	Name    string
	Repeats int // >= 1
	Warmups int // >= 0
}

// ParseSpecs splits a --benchmarks value. Unknown names are the caller's to
// reject; malformed brackets are errors.
func ParseSpecs(list string) ([]Spec, error) {
	var specs []Spec
	for _, item := range strings.Split(list, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		s := Spec{Name: item, Repeats: 1}
		if i := strings.IndexByte(item, '['); i >= 0 {
			if !strings.HasSuffix(item, "]") {
				return nil, fmt.Errorf("benchmark %q: missing ']'", item)
			}
			s.Name = item[:i]
			args := item[i+1 : len(item)-1]
			for _, a := range strings.Split(args, "-") {
				if a == "" {
					continue
				}
				n, err := strconv.Atoi(a[1:])
				if err != nil || n < 0 || len(a) < 2 {
					return nil, fmt.Errorf("benchmark %q: bad argument %q (want X<n> or W<n>)", item, a)
				}
				switch a[0] {
				case 'X', 'x':
					if n < 1 {
						return nil, fmt.Errorf("benchmark %q: repeat count must be >= 1", item)
					}
					s.Repeats = n
				case 'W', 'w':
					s.Warmups = n
				default:
					return nil, fmt.Errorf("benchmark %q: bad argument %q (want X<n> or W<n>)", item, a)
				}
			}
		}
		if s.Name == "" {
			return nil, fmt.Errorf("benchmark %q: empty name", item)
		}
		specs = append(specs, s)
	}
	return specs, nil
}
