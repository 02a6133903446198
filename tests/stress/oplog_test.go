package stress

import (
	"bytes"
	"errors"
	"hash/crc32"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/vigildb/vigil/internal/base"
)

// goldenOps is the content of testdata/oplog.golden, whose bytes were
// produced from the format description by an independent Python script
// (struct.pack and a bitwise CRC-32C), not by this package.
func goldenOps() ([]*opRec, progressCounts) {
	return []*opRec{
		{id: 1, name: namePut, synced: true, status: opOK, inv: 3, ack: 4, writes: []keyWrite{{key: 2, st: set(7)}}},
		{id: 2, name: nameBatch, status: opFailed, inv: 5, ack: 9, writes: []keyWrite{{key: 0, st: del(1)}, {key: 4, st: set(2)}}},
		{id: 3, name: nameFlush, status: opPending, inv: 11},
	}, progressCounts{ops: 10, reads: 4, writes: 3, scans: 2, faults: 1}
}

func writeGoldenOps(t *testing.T, fs vfs.FS, name string) {
	t.Helper()
	ops, prog := goldenOps()
	f, err := createOpLog(fs, name, 5)
	if err != nil {
		t.Fatal(err)
	}
	l := &opLog{file: f}
	for i, o := range ops {
		want := *o
		if err := f.appendIntent(&want); err != nil {
			t.Fatal(err)
		}
		if o.status != opPending {
			if err := f.appendAck(&want); err != nil {
				t.Fatal(err)
			}
		}
		if i == 1 {
			if err := l.progress(prog); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := f.close(); err != nil {
		t.Fatal(err)
	}
}

func TestOpLogGolden(t *testing.T) {
	fs := vfs.NewMem()
	writeGoldenOps(t, fs, "oplog")
	got, err := readFile(fs, "oplog")
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile("testdata/oplog.golden")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("op log bytes changed:\n got %x\nwant %x", got, want)
	}
	c, err := decodeOpLog(want, "golden")
	if err != nil {
		t.Fatal(err)
	}
	ops, prog := goldenOps()
	if c.numKeys != 5 || c.tornTail || c.progress != prog || !reflect.DeepEqual(c.ops, ops) {
		t.Fatalf("decoded %+v (ops %v), want ops %v progress %+v", c, c.ops, ops, prog)
	}
}

func TestStateGolden(t *testing.T) {
	fs := vfs.NewMem()
	states, next := []kstate{del(0), set(5), del(2)}, []uint32{1, 6, 9}
	if err := writeState(fs, "state", states, next); err != nil {
		t.Fatal(err)
	}
	got, err := readFile(fs, "state")
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile("testdata/state.golden")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("state bytes changed:\n got %x\nwant %x", got, want)
	}
	s2, n2, err := readState(fs, "state")
	if err != nil || !reflect.DeepEqual(s2, states) || !reflect.DeepEqual(n2, next) {
		t.Fatalf("readState = %v %v %v", s2, n2, err)
	}
}

// TestOpLogTornTail cuts the golden log at every length: a cut inside the
// last record is a torn tail (the records before it survive), never an
// error; cuts inside the header are errors.
func TestOpLogTornTail(t *testing.T) {
	data, err := os.ReadFile("testdata/oplog.golden")
	if err != nil {
		t.Fatal(err)
	}
	full, err := decodeOpLog(data, "golden")
	if err != nil {
		t.Fatal(err)
	}
	for n := 0; n < len(data); n++ {
		c, err := decodeOpLog(data[:n], "cut")
		if n < opLogHeaderLen {
			if err != nil || len(c.ops) != 0 || !c.tornTail {
				t.Fatalf("cut at %d (inside the header): %+v, %v, want an empty torn log", n, c, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("cut at %d: %v", n, err)
		}
		if len(c.ops) > len(full.ops) {
			t.Fatalf("cut at %d: %d ops from a log of %d", n, len(c.ops), len(full.ops))
		}
		for i, o := range c.ops {
			if o.id != full.ops[i].id || !reflect.DeepEqual(o.writes, full.ops[i].writes) {
				t.Fatalf("cut at %d: op %d = %v, want %v", n, i, o, full.ops[i])
			}
		}
	}
}

// TestOpLogCorruption flips every bit of the golden log outside its last
// record: each flip must be reported as corruption naming the file, or
// (in a length field) read as a torn tail — never accepted silently with
// different contents, and never a panic.
func TestOpLogCorruption(t *testing.T) {
	data, err := os.ReadFile("testdata/oplog.golden")
	if err != nil {
		t.Fatal(err)
	}
	full, _ := decodeOpLog(data, "golden")
	for bit := 0; bit < 8*len(data); bit++ {
		mut := append([]byte{}, data...)
		mut[bit/8] ^= 1 << (bit % 8)
		c, err := decodeOpLog(mut, "flipped")
		switch {
		case err != nil:
			if !errors.Is(err, base.ErrCorruption) || !strings.Contains(err.Error(), "flipped") {
				t.Fatalf("bit %d: error %v does not wrap ErrCorruption naming the file", bit, err)
			}
		case c.tornTail:
			// A flipped length that runs past the end, or a bad last record.
		default:
			if c.numKeys == full.numKeys && reflect.DeepEqual(c.ops, full.ops) && c.progress == full.progress {
				t.Fatalf("bit %d: flip went unnoticed", bit)
			}
			if c.numKeys != full.numKeys && bit/8 >= 8 && bit/8 < 12 {
				continue // the key count is not checksummed; a smaller one fails below
			}
			t.Fatalf("bit %d: decoded different contents without an error: %+v", bit, c)
		}
	}
}

func TestOpLogRejects(t *testing.T) {
	hdr := append([]byte(opLogMagic), 5, 0, 0, 0)
	rec := func(p []byte) []byte {
		b := []byte{0, 0, 0, 0, 0, 0, 0, 0}
		b = append(b, p...)
		le32(b[0:4], uint32(len(p)))
		le32(b[4:8], crcOf(p))
		return b
	}
	intent := func(id byte, key byte) []byte {
		return []byte{recIntent, id, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, byte(namePut), 0, 1, 0, 0, 0, key, 0, 0, 0, 1, 0, 0, 0, 0}
	}
	for name, body := range map[string][]byte{
		"huge length":       {0xff, 0xff, 0xff, 0x7f, 0, 0, 0, 0, 1},
		"unknown type":      rec([]byte{9}),
		"empty record":      rec(nil),
		"short intent":      rec([]byte{recIntent, 1}),
		"count mismatch":    rec(append(intent(1, 2), 0)),
		"key out of space":  rec(intent(1, 5)),
		"duplicate intent":  append(rec(intent(1, 2)), rec(intent(1, 3))...),
		"ack unknown":       rec([]byte{recAck, 7, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1}),
		"ack bad status":    append(rec(intent(1, 2)), rec([]byte{recAck, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 9})...),
		"second ack":        append(rec(intent(1, 2)), append(rec([]byte{recAck, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1}), rec([]byte{recAck, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1})...)...),
		"bad progress size": rec([]byte{recProgress, 1}),
	} {
		data := append(append([]byte{}, hdr...), body...)
		if name != "huge length" {
			data = append(data, rec(append([]byte{recProgress}, make([]byte, 5*8)...))...)
		}
		if _, err := decodeOpLog(data, "bad"); !errors.Is(err, base.ErrCorruption) {
			t.Errorf("%s: %v, want corruption", name, err)
		}
	}
}

func le32(b []byte, v uint32) { b[0], b[1], b[2], b[3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24) }

func crcOf(p []byte) uint32 { return crc32.Checksum(p, crcTable) }

func TestStateRejects(t *testing.T) {
	good, err := os.ReadFile("testdata/state.golden")
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 8*len(good); i++ {
		mut := append([]byte{}, good...)
		mut[i/8] ^= 1 << (i % 8)
		if s, n, err := decodeState(mut, "state"); !errors.Is(err, base.ErrCorruption) {
			t.Fatalf("bit %d: decoded %v %v, %v", i, s, n, err)
		}
	}
	for n := 0; n < len(good); n++ {
		if _, _, err := decodeState(good[:n], "state"); !errors.Is(err, base.ErrCorruption) {
			t.Fatalf("cut at %d: %v", n, err)
		}
	}
	// A well-checksummed file with impossible contents.
	for name, e := range map[string][3]uint32{"next<=ver": {5, 5, 0}, "del flag": {1, 2, 2}, "set v0": {0, 1, 0}} {
		b := encodeState([]kstate{{ver: e[0], del: e[2] == 1}}, []uint32{e[1]})
		b[stateHeaderLen+8] = byte(e[2])
		b = append(b[:len(b)-4], 0, 0, 0, 0)
		le32(b[len(b)-4:], crcOf(b[:len(b)-4]))
		if _, _, err := decodeState(b, "state"); !errors.Is(err, base.ErrCorruption) {
			t.Errorf("%s: %v, want corruption", name, err)
		}
	}
}

func FuzzDecodeOpLog(f *testing.F) {
	if data, err := os.ReadFile("testdata/oplog.golden"); err == nil {
		f.Add(data)
		f.Add(data[:len(data)-3])
	}
	f.Add([]byte(opLogMagic))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := decodeOpLog(b, "fuzz")
		if err != nil {
			if !errors.Is(err, base.ErrCorruption) {
				t.Fatalf("error %v does not wrap ErrCorruption", err)
			}
			return
		}
		// Never more writes than the input could hold.
		n := 0
		for _, o := range c.ops {
			n += len(o.writes)
			for _, w := range o.writes {
				if int(w.key) >= c.numKeys {
					t.Fatalf("key %d outside %d", w.key, c.numKeys)
				}
			}
		}
		if n*writeLen > len(b) {
			t.Fatalf("%d writes from %d bytes", n, len(b))
		}
	})
}

func FuzzDecodeState(f *testing.F) {
	if data, err := os.ReadFile("testdata/state.golden"); err == nil {
		f.Add(data)
	}
	f.Add([]byte(stateMagic + "\x01\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, n, err := decodeState(b, "fuzz")
		if err != nil {
			if !errors.Is(err, base.ErrCorruption) {
				t.Fatalf("error %v does not wrap ErrCorruption", err)
			}
			return
		}
		if !bytes.Equal(encodeState(s, n), b) {
			t.Fatalf("decoded state does not re-encode to the input")
		}
	})
}

func BenchmarkOpLogAppend(b *testing.B) {
	fs := vfs.NewMem()
	f, err := createOpLog(fs, "oplog", 1000)
	if err != nil {
		b.Fatal(err)
	}
	l := &opLog{file: f}
	tick := uint64(0)
	clock := func() uint64 { tick++; return tick }
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		o := &opRec{name: namePut, writes: []keyWrite{{key: uint32(i % 1000), st: set(uint32(i + 1))}}}
		if err := l.begin(o, clock); err != nil {
			b.Fatal(err)
		}
		if err := l.end(o, true, clock); err != nil {
			b.Fatal(err)
		}
		if len(l.ops) > 4096 {
			l.take()
		}
	}
}

// TestOpLogVerifiedGolden pins the verified record (bytes from the same
// independent script as oplog.golden) and its meaning: operations before
// it are settled, the state it carries is the base for those after it.
func TestOpLogVerifiedGolden(t *testing.T) {
	want, err := os.ReadFile("testdata/oplog_verified.golden")
	if err != nil {
		t.Fatal(err)
	}
	fs := vfs.NewMem()
	f, err := createOpLog(fs, "oplog", 3)
	if err != nil {
		t.Fatal(err)
	}
	l := &opLog{file: f}
	ops := []*opRec{
		{id: 1, name: namePut, status: opOK, inv: 1, ack: 2, writes: []keyWrite{{key: 0, st: set(1)}}},
		{id: 2, name: nameClose, status: opFailed, inv: 3, ack: 4},
		{id: 3, name: namePut, synced: true, status: opPending, inv: 6, writes: []keyWrite{{key: 1, st: set(1)}}},
	}
	verified := []kstate{set(1), del(0), del(0)}
	for _, o := range ops {
		if err := f.appendIntent(o); err != nil {
			t.Fatal(err)
		}
		if o.status != opPending {
			if err := f.appendAck(o); err != nil {
				t.Fatal(err)
			}
		}
		if o.id == 2 {
			if err := l.verified(verified); err != nil {
				t.Fatal(err)
			}
		}
	}
	got, err := readFile(fs, "oplog")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("op log bytes changed:\n got %x\nwant %x", got, want)
	}
	c, err := decodeOpLog(want, "golden")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(c.settled, ops[:2]) || !reflect.DeepEqual(c.ops, ops[2:]) || !reflect.DeepEqual(c.verified, verified) {
		t.Fatalf("decoded settled %v, ops %v, verified %v", c.settled, c.ops, c.verified)
	}
	// A verified record while an operation has no answer cannot happen
	// (the child verifies with every worker stopped): corruption.
	pendingThenVerified := append(append([]byte{}, want[:opLogHeaderLen]...), want[len(want)-(8+intentFixedLen+writeLen):]...)
	c, err = decodeOpLog(pendingThenVerified, "x")
	if err != nil || len(c.ops) != 1 {
		t.Fatalf("a lone pending intent: %+v, %v", c, err)
	}
	verifiedRec := want[len(want)-(8+intentFixedLen+writeLen)-(8+1+3*stateEntryLenV) : len(want)-(8+intentFixedLen+writeLen)]
	if _, err := decodeOpLog(append(pendingThenVerified, verifiedRec...), "x"); !errors.Is(err, base.ErrCorruption) {
		t.Fatalf("verified record after an unanswered intent: %v, want corruption", err)
	}
}
