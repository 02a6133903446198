package chaos

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// Input is a client operation as the history records it.
type Input struct {
	Op    string // "get", "put" or "cas"
	Key   string
	Value string // put: the value; cas: the new value
	Old   string // cas: the value expected ("" = absent)
	Lease bool   // get: a lease read (VerifyLeader, Barrier, local read), not through the log
}

// Output is what the operation returned.
type Output struct {
	Value string // get: the value read; cas: the value found
	OK    bool   // cas: it swapped
	// Unknown: the client got no answer it can trust (a timeout, a lost
	// connection, a leadership change after the proposal). The operation
	// may have taken effect at any time after its call, or never: the
	// history gives it a return time after every other operation.
	Unknown bool
}

// unknownReturn is the return time of an operation whose outcome is
// unknown: after everything else.
const unknownReturn = math.MaxInt64

// kvModel is the sequential specification of one key: a register with
// get, put and compare-and-set, absent ("") at first. Histories are
// partitioned by key, so porcupine checks each key on its own.
var kvModel = porcupine.Model{
	Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		var keys []string
		for _, op := range h {
			k := op.Input.(Input).Key
			if _, ok := byKey[k]; !ok {
				keys = append(keys, k)
			}
			byKey[k] = append(byKey[k], op)
		}
		slices.Sort(keys)
		var parts [][]porcupine.Operation
		for _, k := range keys {
			parts = append(parts, byKey[k])
		}
		return parts
	},
	Init: func() any { return "" },
	Step: func(state, input, output any) (bool, any) {
		s, in, out := state.(string), input.(Input), output.(Output)
		switch in.Op {
		case "get":
			return out.Value == s, s
		case "put":
			return true, in.Value
		case "cas":
			switch {
			case out.Unknown && s == in.Old:
				// Taking effect here is one possibility; not taking
				// effect is linearizing it last, where it changes
				// nothing that anything observes.
				return true, in.Value
			case out.Unknown:
				return true, s
			case out.OK:
				return s == in.Old, in.Value
			default:
				return s != in.Old && out.Value == s, s
			}
		}
		return false, s
	},
	DescribeOperation: func(input, output any) string { return describe(input.(Input), output.(Output)) },
	DescribeState:     func(state any) string { return fmt.Sprintf("%q", state) },
}

func describe(in Input, out Output) string {
	var call string
	switch in.Op {
	case "get":
		call = fmt.Sprintf("get(%s)", in.Key)
		if in.Lease {
			call = fmt.Sprintf("lease-get(%s)", in.Key)
		}
	case "put":
		call = fmt.Sprintf("put(%s, %q)", in.Key, in.Value)
	default:
		call = fmt.Sprintf("cas(%s, %q -> %q)", in.Key, in.Old, in.Value)
	}
	switch {
	case out.Unknown:
		return call + " -> unknown"
	case in.Op == "get":
		return fmt.Sprintf("%s -> %q", call, out.Value)
	case in.Op == "cas" && !out.OK:
		return fmt.Sprintf("%s -> failed, found %q", call, out.Value)
	}
	return call + " -> ok"
}

// CheckResult is the outcome of a linearizability check.
type CheckResult struct {
	Result porcupine.CheckResult // Ok, Illegal, or Unknown (timed out)
	Ops    int
	Keys   int
	// Minimal is, for an illegal history, the shortest one found among
	// the failing key's operations (a prefix in call order, then
	// operations removed one by one while it stays illegal), formatted one
	// operation per line.
	Minimal string
	info    porcupine.LinearizationInfo
}

// Check checks a history for linearizability against the KV model, taking
// at most timeout, and for an illegal one looks for a minimal failing
// history.
func Check(history []porcupine.Operation, timeout time.Duration) CheckResult {
	res, info := porcupine.CheckOperationsVerbose(kvModel, history, timeout)
	cr := CheckResult{Result: res, Ops: len(history), Keys: len(kvModel.Partition(history)), info: info}
	if res != porcupine.Illegal {
		return cr
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, part := range kvModel.Partition(history) {
		if illegal(part) {
			cr.Minimal = format(minimize(part, deadline))
			break
		}
	}
	return cr
}

// Visualize writes porcupine's HTML view of the checked history to path.
func (cr CheckResult) Visualize(path string) error {
	return porcupine.VisualizePath(kvModel, cr.info, path)
}

func illegal(h []porcupine.Operation) bool {
	return porcupine.CheckOperationsTimeout(kvModel, h, 5*time.Second) == porcupine.Illegal
}

// minimize shrinks the illegal history h of one key: the shortest prefix
// in call order that is illegal (a binary search, checked, else h), then
// each operation dropped in turn if the rest stays illegal, until the
// deadline. A write whose value an operation that stays observed is kept:
// without it that read would be illegal for a reason that says nothing
// about the bug.
func minimize(h []porcupine.Operation, deadline time.Time) []porcupine.Operation {
	h = slices.Clone(h)
	slices.SortFunc(h, func(a, b porcupine.Operation) int { return cmp.Compare(a.Call, b.Call) })
	lo, hi := 1, len(h)
	for lo < hi && time.Now().Before(deadline) {
		mid := (lo + hi) / 2
		if illegal(h[:mid]) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	if illegal(h[:hi]) {
		h = h[:hi]
	}
	for i := 0; i < len(h) && time.Now().Before(deadline); {
		shorter := slices.Delete(slices.Clone(h), i, i+1)
		if !observed(h[i], shorter) && illegal(shorter) {
			h = shorter
		} else {
			i++
		}
	}
	return h
}

// observed reports whether an operation of h read or expected the value
// that op writes.
func observed(op porcupine.Operation, h []porcupine.Operation) bool {
	in := op.Input.(Input)
	if in.Op == "get" {
		return false
	}
	for _, o := range h {
		oi, oo := o.Input.(Input), o.Output.(Output)
		if (oi.Op == "cas" && oi.Old == in.Value) || (!oo.Unknown && oo.Value == in.Value) {
			return true
		}
	}
	return false
}

// format prints a history one operation per line: client, call and return
// times (seconds since the run started), operation and outcome.
func format(h []porcupine.Operation) string {
	var sb strings.Builder
	for _, op := range h {
		ret := "       ?"
		if op.Return != unknownReturn {
			ret = fmt.Sprintf("%8.3fs", time.Duration(op.Return).Seconds())
		}
		fmt.Fprintf(&sb, "  client %2d  [%8.3fs, %s]  %s\n", op.ClientId,
			time.Duration(op.Call).Seconds(), ret, describe(op.Input.(Input), op.Output.(Output)))
	}
	return sb.String()
}
