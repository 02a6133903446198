package vigil

import (
	"encoding/hex"
	"errors"
	"testing"
)

// TestWALMetaGolden pins the layout of the WAL's meta records.
func TestWALMetaGolden(t *testing.T) {
	pre := walPreamble{prevLogNum: 7, prevSize: 40000, lastSeq: 300}
	if got, want := hex.EncodeToString(pre.encode()),
		"56474c4d455441ff"+"01"+"07"+"c0b802"+"ac02"; got != want { // magic, preamble, log 7, 40000 bytes, seq 300
		t.Fatalf("preamble encoding changed:\n got %s\nwant %s", got, want)
	}
	if got, want := hex.EncodeToString(encodeWALClose(300)),
		"56474c4d455441ff"+"02"+"ac02"; got != want { // magic, close, seq 300
		t.Fatalf("close record encoding changed:\n got %s\nwant %s", got, want)
	}
	if got, want := hex.EncodeToString(encodeWALIngest(300, 301)),
		"56474c4d455441ff"+"03"+"ac02"+"ad02"; got != want { // magic, ingestion, seqs 300..301
		t.Fatalf("ingestion record encoding changed:\n got %s\nwant %s", got, want)
	}
	// A meta record can never decode as a batch: its eighth byte makes the
	// seqnum exceed the maximum.
	if _, err := newBatchReader(pre.encode(), "test"); !errors.Is(err, ErrCorruption) {
		t.Fatalf("a preamble decodes as a batch: %v", err)
	}
}

func TestWALMetaRoundTripAndDamage(t *testing.T) {
	pre := walPreamble{prevLogNum: 1<<40 + 3, prevSize: 1 << 33, lastSeq: 1<<56 - 1}
	m, err := decodeWALMeta(pre.encode(), "test")
	if err != nil || m.kind != walMetaPreamble || m.preamble != pre {
		t.Fatalf("round trip: %+v, %v", m, err)
	}
	m, err = decodeWALMeta(encodeWALClose(42), "test")
	if err != nil || m.kind != walMetaClose || m.lastSeq != 42 {
		t.Fatalf("close round trip: %+v, %v", m, err)
	}
	m, err = decodeWALMeta(encodeWALIngest(5, 6), "test")
	if err != nil || m.kind != walMetaIngest || m.firstSeq != 5 || m.lastSeq != 6 {
		t.Fatalf("ingestion round trip: %+v, %v", m, err)
	}
	for _, bad := range [][2]uint64{{0, 3}, {7, 6}, {5, 1 << 60}} {
		if _, err := decodeWALMeta(encodeWALIngest(bad[0], bad[1]), "test"); !errors.Is(err, ErrCorruption) {
			t.Fatalf("ingestion record %v: %v", bad, err)
		}
	}
	for _, enc := range [][]byte{pre.encode(), encodeWALClose(42), encodeWALIngest(5, 6)} {
		for n := 0; n < len(enc); n++ {
			if _, err := decodeWALMeta(enc[:n], "test"); !errors.Is(err, ErrCorruption) {
				t.Fatalf("truncation to %d bytes: %v, want ErrCorruption", n, err)
			}
		}
		if _, err := decodeWALMeta(append(enc[:len(enc):len(enc)], 0), "test"); !errors.Is(err, ErrCorruption) {
			t.Fatalf("trailing byte: %v", err)
		}
	}
	bad := pre.encode()
	bad[8] = 9
	if _, err := decodeWALMeta(bad, "test"); !errors.Is(err, ErrCorruption) {
		t.Fatalf("unknown kind: %v", err)
	}
	if _, err := decodeWALMeta(walPreamble{lastSeq: 1 << 60}.encode(), "test"); !errors.Is(err, ErrCorruption) {
		t.Fatalf("seqnum over the maximum: %v", err)
	}
}

// FuzzWALMeta: arbitrary meta records never panic; whatever decodes is
// corruption-free and re-encodes to the same bytes.
func FuzzWALMeta(f *testing.F) {
	f.Add(walPreamble{prevLogNum: 7, prevSize: 40000, lastSeq: 300}.encode())
	f.Add(encodeWALClose(9))
	f.Add(encodeWALIngest(9, 10))
	f.Add([]byte(walMetaMagic))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := decodeWALMeta(data, "fuzz")
		if err != nil {
			if !errors.Is(err, ErrCorruption) {
				t.Fatalf("not corruption: %v", err)
			}
			return
		}
		var enc []byte
		switch m.kind {
		case walMetaPreamble:
			enc = m.preamble.encode()
		case walMetaClose:
			enc = encodeWALClose(m.lastSeq)
		case walMetaIngest:
			enc = encodeWALIngest(m.firstSeq, m.lastSeq)
		default:
			t.Fatalf("decoded unknown kind %d", m.kind)
		}
		if _, err := decodeWALMeta(enc, "fuzz"); err != nil {
			t.Fatalf("re-decoding: %v", err)
		}
	})
}
