package vigil

import (
	"encoding/hex"
	"errors"
	"testing"

	"github.com/vigildb/vigil/internal/base"
)

// TestBatchEncodingGolden pins the batch layout, which is also the WAL
// record payload: changing it breaks recovery of existing WALs.
func TestBatchEncodingGolden(t *testing.T) {
	var b Batch
	b.Put([]byte("key"), []byte("value"))
	b.Delete([]byte("gone"))
	b.DeleteRange([]byte("a"), []byte("c"))
	b.setSeqNum(0x0102030405)
	const want = "0504030201000000" + "03000000" +
		"01" + "03" + "6b6579" + "05" + "76616c7565" +
		"00" + "04" + "676f6e65" +
		"0f" + "01" + "61" + "01" + "63"
	if got := hex.EncodeToString(b.data); got != want {
		t.Fatalf("batch encoding changed:\n got %s\nwant %s", got, want)
	}
	r, err := newBatchReader(b.data, "test")
	if err != nil {
		t.Fatal(err)
	}
	wantRecs := []struct {
		kind       base.Kind
		key, value string
	}{{base.KindSet, "key", "value"}, {base.KindDelete, "gone", ""}, {base.KindRangeDelete, "a", "c"}}
	for i, w := range wantRecs {
		kind, key, value, ok, err := r.next("test")
		if err != nil || !ok || kind != w.kind || string(key) != w.key || string(value) != w.value {
			t.Fatalf("record %d: %v %q %q ok=%v err=%v", i, kind, key, value, ok, err)
		}
	}
	if _, _, _, ok, err := r.next("test"); ok || err != nil {
		t.Fatalf("after the last record: ok=%v err=%v", ok, err)
	}
}

func TestBatchReaderRejectsDamage(t *testing.T) {
	var b Batch
	b.Put([]byte("key"), []byte("value"))
	b.Put([]byte("k2"), []byte("v2"))
	b.setSeqNum(7)
	good := append([]byte(nil), b.data...)
	cases := map[string]func([]byte) []byte{
		"short header":   func(d []byte) []byte { return d[:5] },
		"count too high": func(d []byte) []byte { d[8] = 3; return d },
		"count too low":  func(d []byte) []byte { d[8] = 1; return d },
		"huge count":     func(d []byte) []byte { d[11] = 0xff; return d },
		"bad kind":       func(d []byte) []byte { d[12] = 9; return d },
		"key too long":   func(d []byte) []byte { d[13] = 100; return d },
		"truncated":      func(d []byte) []byte { return d[:len(d)-1] },
		"seq overflow":   func(d []byte) []byte { d[7] = 0xff; return d },
	}
	for name, damage := range cases {
		d := damage(append([]byte(nil), good...))
		err := func() error {
			r, err := newBatchReader(d, "test")
			if err != nil {
				return err
			}
			for {
				_, _, _, ok, err := r.next("test")
				if err != nil {
					return err
				}
				if !ok {
					return nil
				}
			}
		}()
		if !errors.Is(err, ErrCorruption) {
			t.Errorf("%s: err = %v, want ErrCorruption", name, err)
		}
	}
}

// FuzzBatchReader: decoding arbitrary bytes never panics, and a batch that
// decodes re-encodes to the same bytes.
func FuzzBatchReader(f *testing.F) {
	var b Batch
	b.Put([]byte("key"), []byte("value"))
	b.Delete([]byte("gone"))
	b.DeleteRange([]byte("a"), []byte("c"))
	b.setSeqNum(42)
	f.Add(b.data)
	f.Add([]byte{})
	f.Add(make([]byte, 12))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := newBatchReader(data, "fuzz")
		if err != nil {
			if !errors.Is(err, ErrCorruption) {
				t.Fatalf("error not marked corruption: %v", err)
			}
			return
		}
		var rebuilt Batch
		for {
			kind, key, value, ok, err := r.next("fuzz")
			if err != nil {
				if !errors.Is(err, ErrCorruption) {
					t.Fatalf("error not marked corruption: %v", err)
				}
				return
			}
			if !ok {
				break
			}
			rebuilt.add(kind, key, value, kind != base.KindDelete)
		}
		rebuilt.setSeqNum(r.seq)
		if r.count == 0 {
			return
		}
		if string(rebuilt.data) != string(data) {
			// Non-minimal varints decode but re-encode differently; only
			// flag a mismatch in length-independent content.
			if len(rebuilt.data) == len(data) {
				t.Fatalf("round trip mismatch:\n%x\n%x", data, rebuilt.data)
			}
		}
	})
}

// TestBatchGrowsByDoubling: a large batch's buffer doubles as it grows, so
// building it copies its bytes about once in all and leaves at most about
// as much garbage behind (append's quarter steps left five times the batch).
func TestBatchGrowsByDoubling(t *testing.T) {
	var b Batch
	key, val := make([]byte, 32), make([]byte, 32)
	grows, last := 0, 0
	for i := 0; i < 100000; i++ {
		key[0], key[1], key[2] = byte(i), byte(i>>8), byte(i>>16)
		b.Put(key, val)
		if c := cap(b.data); c != last {
			if last != 0 && c < 2*last {
				t.Fatalf("buffer grew from %d to %d bytes, less than double", last, c)
			}
			grows, last = grows+1, c
		}
	}
	if max := 14; grows > max { // 1 KiB doubled to 8 MiB
		t.Fatalf("%d reallocations for a %d-byte batch, want at most %d", grows, len(b.data), max)
	}
}
