package checksum

import (
	"errors"
	"strconv"
	"strings"
	"testing"
)

func TestTypeNumbering(t *testing.T) {
	// RocksDB's ChecksumType values plus ours; stored on disk, never change.
	want := map[Type]uint8{None: 0, CRC32c: 1, XXHash: 2, XXHash64: 3, XXH3: 4, CRC64: 5}
	for typ, n := range want {
		if uint8(typ) != n {
			t.Errorf("%s = %d, want %d", typ, uint8(typ), n)
		}
	}
	if NumTypes != 6 {
		t.Errorf("NumTypes = %d", NumTypes)
	}
}

func TestTypeNames(t *testing.T) {
	cases := []struct {
		t           Type
		short, rock string
	}{
		{None, "none", "kNoChecksum"},
		{CRC32c, "crc32c", "kCRC32c"},
		{XXHash, "xxhash", "kxxHash"},
		{XXHash64, "xxhash64", "kxxHash64"},
		{XXH3, "xxh3", "kXXH3"},
		{CRC64, "crc64", "kCRC64"},
	}
	for _, c := range cases {
		if !c.t.Valid() || c.t.Check() != nil {
			t.Errorf("%d not valid", c.t)
		}
		if got := c.t.String(); got != c.short {
			t.Errorf("String(%d) = %q, want %q", c.t, got, c.short)
		}
		if got := c.t.RocksDBName(); got != c.rock {
			t.Errorf("RocksDBName(%d) = %q, want %q", c.t, got, c.rock)
		}
		for _, s := range []string{c.short, c.rock, strings.ToUpper(c.short), strings.ToLower(c.rock),
			" " + c.short + " ", string(rune('0' + c.t))} {
			got, err := ParseType(s)
			if err != nil || got != c.t {
				t.Errorf("ParseType(%q) = %v, %v; want %v", s, got, err, c.t)
			}
		}
	}
	if got := Type(9).String(); got != "Type(9)" {
		t.Errorf("String(9) = %q", got)
	}
	if got := Type(9).RocksDBName(); got != "Type(9)" {
		t.Errorf("RocksDBName(9) = %q", got)
	}
}

func TestInvalidType(t *testing.T) {
	for _, n := range []uint8{6, 123, 255} {
		typ := Type(n)
		if typ.Valid() {
			t.Errorf("Type(%d).Valid()", n)
		}
		err := typ.Check()
		if !errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("Type(%d).Check() = %v, want ErrInvalidArgument", n, err)
		}
		msg := err.Error()
		if !strings.Contains(msg, "unknown checksum type "+strconv.Itoa(int(n))) {
			t.Errorf("error %q does not name the value %d", msg, n)
		}
		for v := Type(0); v < NumTypes; v++ {
			if !strings.Contains(msg, strconv.Itoa(int(v))+" ("+v.String()+")") {
				t.Errorf("error %q does not list %d (%s)", msg, v, v)
			}
		}
		got, err := ParseType(strconv.Itoa(int(n)))
		if !errors.Is(err, ErrInvalidArgument) || got != 0 {
			t.Errorf("ParseType(%d) = %v, %v; want 0 and ErrInvalidArgument", n, got, err)
		}
		if Block(typ, []byte("x"), 0) != 0 || Value(typ, []byte("x")) != 0 || Sum64(typ, []byte("x")) != 0 ||
			KV(typ, []byte("k"), 1, []byte("v")) != 0 {
			t.Errorf("Type(%d): checksum functions must return 0 for invalid types", n)
		}
	}
	for _, s := range []string{"foo", "", "256", "-1", "kxxh", "crc", "xxh3x", "4x"} {
		got, err := ParseType(s)
		if !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("ParseType(%q) = %v, %v; want ErrInvalidArgument", s, got, err)
			continue
		}
		if got != 0 || !strings.Contains(err.Error(), `"`+s+`"`) || !strings.Contains(err.Error(), "4 (xxh3)") {
			t.Errorf("ParseType(%q) error %q should name the input and list the valid types", s, err)
		}
	}
}
