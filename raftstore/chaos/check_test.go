package chaos

import (
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

func op(client int, call, ret int64, in Input, out Output) porcupine.Operation {
	if out.Unknown {
		ret = unknownReturn
	}
	return porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret}
}

func put(k, v string) Input      { return Input{Op: "put", Key: k, Value: v} }
func get(k string) Input         { return Input{Op: "get", Key: k} }
func cas(k, old, v string) Input { return Input{Op: "cas", Key: k, Old: old, Value: v} }

func TestCheck(t *testing.T) {
	ok, swapped := Output{}, Output{OK: true}
	for _, tc := range []struct {
		name    string
		h       []porcupine.Operation
		want    porcupine.CheckResult
		minimal []string // lines the minimal history holds, in order
	}{
		{"sequential", []porcupine.Operation{
			op(0, 0, 1, put("a", "1"), ok),
			op(0, 2, 3, get("a"), Output{Value: "1"}),
			op(0, 4, 5, cas("a", "1", "2"), swapped),
			op(0, 6, 7, cas("a", "1", "3"), Output{Value: "2"}),
			op(0, 8, 9, get("a"), Output{Value: "2"}),
		}, porcupine.Ok, nil},
		{"concurrent reads either side of a write", []porcupine.Operation{
			op(0, 0, 10, put("a", "1"), ok),
			op(1, 1, 2, get("a"), Output{Value: ""}),
			op(2, 3, 4, get("a"), Output{Value: "1"}),
			op(1, 5, 6, get("a"), Output{Value: "1"}),
		}, porcupine.Ok, nil},
		{"an unknown put may land late", []porcupine.Operation{
			op(0, 0, 0, put("a", "1"), Output{Unknown: true}),
			op(1, 5, 6, get("a"), Output{Value: ""}),
			op(1, 7, 8, get("a"), Output{Value: "1"}),
		}, porcupine.Ok, nil},
		{"an unknown cas may never happen", []porcupine.Operation{
			op(0, 0, 1, put("a", "1"), ok),
			op(1, 2, 0, cas("a", "1", "2"), Output{Unknown: true}),
			op(2, 9, 10, get("a"), Output{Value: "1"}),
		}, porcupine.Ok, nil},
		{"keys are independent", []porcupine.Operation{
			op(0, 0, 1, put("a", "1"), ok),
			op(1, 2, 3, get("b"), Output{Value: ""}),
		}, porcupine.Ok, nil},
		{"a stale read after a completed write", []porcupine.Operation{
			op(0, 0, 1, put("a", "1"), ok),
			op(3, 0, 1, put("b", "x"), ok),
			op(0, 2, 3, put("a", "2"), ok),
			op(3, 2, 3, get("b"), Output{Value: "x"}),
			op(1, 4, 5, get("a"), Output{Value: "2"}),
			op(2, 6, 7, get("a"), Output{Value: "1"}),
			op(1, 8, 9, put("a", "3"), ok),
		}, porcupine.Illegal, []string{`put(a, "1") -> ok`, `put(a, "2") -> ok`, `get(a) -> "1"`}},
		{"a cas that swapped from the wrong value", []porcupine.Operation{
			op(0, 0, 1, put("a", "1"), ok),
			op(0, 2, 3, cas("a", "0", "2"), swapped),
		}, porcupine.Illegal, []string{`cas(a, "0" -> "2") -> ok`}}, // "0" was never there
		{"a failed cas that found the expected value", []porcupine.Operation{
			op(0, 0, 1, put("a", "1"), ok),
			op(0, 2, 3, cas("a", "1", "2"), Output{Value: "1"}),
		}, porcupine.Illegal, []string{`put(a, "1") -> ok`, `cas(a, "1" -> "2") -> failed, found "1"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cr := Check(tc.h, 10*time.Second)
			if cr.Result != tc.want {
				t.Fatalf("Check = %s, want %s", cr.Result, tc.want)
			}
			lines := strings.Split(strings.TrimRight(cr.Minimal, "\n"), "\n")
			if tc.minimal == nil {
				if cr.Minimal != "" {
					t.Fatalf("a minimal history for a legal one:\n%s", cr.Minimal)
				}
				return
			}
			if len(lines) != len(tc.minimal) {
				t.Fatalf("minimal history:\n%s\nwant %d operations", cr.Minimal, len(tc.minimal))
			}
			for i, want := range tc.minimal {
				if !strings.HasSuffix(lines[i], want) {
					t.Errorf("minimal history line %d: %q, want it to end in %q", i, lines[i], want)
				}
			}
		})
	}
}
