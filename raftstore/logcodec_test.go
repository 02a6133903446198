package raftstore

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/vigildb/vigil"
)

func sameLog(a, b *raft.Log) bool {
	return a.Index == b.Index && a.Term == b.Term && a.Type == b.Type &&
		bytes.Equal(a.Data, b.Data) && bytes.Equal(a.Extensions, b.Extensions) &&
		a.AppendedAt.Equal(b.AppendedAt) && a.AppendedAt.IsZero() == b.AppendedAt.IsZero()
}

var codecCases = []raft.Log{
	{},
	{Index: 1, Term: 1, Type: raft.LogNoop},
	{Index: 5, Term: 2, Type: raft.LogCommand, Data: []byte("data")},
	{Index: 1<<64 - 1, Term: 1<<64 - 1, Type: raft.LogConfiguration, Data: bytes.Repeat([]byte{0xab}, 1000)},
	{Index: 7, Term: 3, Type: raft.LogCommand, Data: []byte("d"), Extensions: []byte("ext"), AppendedAt: time.Unix(1700000000, 123456789)},
	{Index: 8, Term: 3, Type: raft.LogBarrier, AppendedAt: time.Unix(-5, 999999999)},
	{Index: 9, Term: 3, Type: raft.LogType(200), Extensions: []byte{0}},
	{Index: 10, Term: 4, AppendedAt: time.Date(1, 1, 1, 0, 0, 0, 1, time.UTC)}, // not IsZero
	{Index: 11, Term: 4, AppendedAt: time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)},
}

func TestLogRoundTrip(t *testing.T) {
	for i, l := range codecCases {
		enc := AppendLog([]byte("prefix"), &l)
		if !bytes.HasPrefix(enc, []byte("prefix")) {
			t.Fatalf("case %d: AppendLog lost dst", i)
		}
		enc = enc[len("prefix"):]
		if len(enc) > EncodedLogSize(&l) {
			t.Errorf("case %d: %d bytes, EncodedLogSize says at most %d", i, len(enc), EncodedLogSize(&l))
		}
		var got raft.Log
		if err := DecodeLog(enc, &got); err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		if !sameLog(&l, &got) {
			t.Errorf("case %d: round trip\n got %+v\nwant %+v", i, got, l)
		}
		// Appending to Data must not clobber Extensions, and vice versa.
		if got.Extensions != nil && cap(got.Extensions) != len(got.Extensions) {
			t.Errorf("case %d: Extensions has spare capacity", i)
		}
		if got.Data != nil && cap(got.Data) != len(got.Data) {
			t.Errorf("case %d: Data has spare capacity", i)
		}
	}
}

// TestLogFormatGolden pins format version 1: a change here breaks every
// stored log.
func TestLogFormatGolden(t *testing.T) {
	l := raft.Log{Index: 300, Term: 2, Type: raft.LogCommand, Data: []byte("hi"), Extensions: []byte("x"), AppendedAt: time.Unix(1, 2)}
	const want = "010003" + "ac02" + "02" + "02" + "02" + "01" + "78" + "6869"
	if got := hex.EncodeToString(AppendLog(nil, &l)); got != want {
		t.Fatalf("encoding\n got %s\nwant %s", got, want)
	}
	l2 := raft.Log{Index: 5, Term: 1, Data: []byte("data")}
	if got, want := hex.EncodeToString(AppendLog(nil, &l2)), "010000050164617461"; got != want {
		t.Fatalf("encoding\n got %s\nwant %s", got, want)
	}
}

func TestDecodeLogCorrupt(t *testing.T) {
	good := AppendLog(nil, &raft.Log{Index: 300, Term: 2, Extensions: []byte("ext"), AppendedAt: time.Unix(1, 2), Data: []byte("x")})
	bad := map[string][]byte{
		"empty":           {},
		"short":           {1, 0},
		"version 0":       {0, 0, 0, 1, 1},
		"version 2":       {2, 0, 0, 1, 1},
		"unknown flag":    {1, 0, 4, 1, 1},
		"index truncated": {1, 0, 0, 0x80},
		"term missing":    {1, 0, 0, 5},
		"index overflow":  {1, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 1},
		"time missing":    {1, 0, 1, 5, 1},
		"nanos too big":   {1, 0, 1, 5, 1, 2, 0x80, 0x94, 0xeb, 0xdc, 0x03},
		"ext missing":     {1, 0, 2, 5, 1},
		"ext zero":        {1, 0, 2, 5, 1, 0},
		"ext too long":    {1, 0, 2, 5, 1, 4, 'a', 'b', 'c'},
	}
	// Every prefix that cuts the header or the extensions (a cut in the
	// data is indistinguishable from shorter data: Vigil's checksums catch
	// that).
	for i := range len(good) - 1 {
		bad[fmt.Sprintf("prefix of %d bytes", i)] = good[:i]
	}
	for name, b := range bad {
		var l raft.Log
		err := DecodeLog(b, &l)
		if !errors.Is(err, vigil.ErrCorruption) {
			t.Errorf("%s (%x): err = %v, want ErrCorruption", name, b, err)
		}
	}
}

func TestDecodeLogAllocs(t *testing.T) {
	enc := AppendLog(nil, &codecCases[4])
	var l raft.Log
	if n := testing.AllocsPerRun(100, func() { _ = DecodeLog(enc, &l) }); n != 0 {
		t.Errorf("DecodeLog allocates %v times", n)
	}
}

// FuzzDecodeLog: arbitrary bytes never panic; what decodes re-encodes to
// bytes that decode to the same entry.
func FuzzDecodeLog(f *testing.F) {
	for _, l := range codecCases {
		f.Add(AppendLog(nil, &l))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var l raft.Log
		if err := DecodeLog(b, &l); err != nil {
			if !errors.Is(err, vigil.ErrCorruption) {
				t.Fatalf("error not wrapping ErrCorruption: %v", err)
			}
			return
		}
		var again raft.Log
		if err := DecodeLog(AppendLog(nil, &l), &again); err != nil {
			t.Fatalf("re-encoding of %+v does not decode: %v", l, err)
		}
		if !sameLog(&l, &again) {
			t.Fatalf("re-encoding changed the entry:\n%+v\n%+v", l, again)
		}
	})
}
