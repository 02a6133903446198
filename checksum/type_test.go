package checksum

import (
	"errors"
	"strconv"
	"strings"
	"testing"
)

func TestTypeNumbering(t *testing.T) {
	// RocksDB's ChecksumType values plus ours: the codes stored on disk and
	// given to --checksum_type, which never change.
	codes := map[Type]uint8{None: 0, CRC32c: 1, XXHash: 2, XXHash64: 3, XXH3: 4, CRC64: 5}
	for typ, c := range codes {
		if got := typ.Code(); got != c {
			t.Errorf("%s.Code() = %d, want %d", typ, got, c)
		}
		if got := TypeFromCode(c); got != typ {
			t.Errorf("TypeFromCode(%d) = %s, want %s", c, got, typ)
		}
		if typ.Resolve() != typ {
			t.Errorf("%s.Resolve() = %s", typ, typ.Resolve())
		}
	}
	// The zero value is the default, stored as XXH3.
	var zero Type
	if zero != Default || Default.Resolve() != XXH3 || Default.Code() != XXH3.Code() || !Default.Valid() {
		t.Errorf("zero Type = %s, resolves to %s, code %d", zero, Default.Resolve(), Default.Code())
	}
	if NumTypes != 7 {
		t.Errorf("NumTypes = %d", NumTypes)
	}
	// Every other code is invalid, and so is what TypeFromCode gives.
	for c := 6; c <= 255; c++ {
		if typ := TypeFromCode(uint8(c)); typ.Valid() || typ.Check() == nil {
			t.Errorf("TypeFromCode(%d) = %s is valid", c, typ)
		}
	}
	if Type(NumTypes).Code() < 6 || Type(NumTypes).Resolve() != Type(NumTypes) {
		t.Errorf("invalid type has code %d", Type(NumTypes).Code())
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
			" " + c.short + " ", string(rune('0' + c.t.Code()))} {
			got, err := ParseType(s)
			if err != nil || got != c.t {
				t.Errorf("ParseType(%q) = %v, %v; want %v", s, got, err, c.t)
			}
		}
	}
	// Default names what it means; ParseType never returns it.
	if got := Default.String(); got != "default(xxh3)" {
		t.Errorf("String(Default) = %q", got)
	}
	if got := Default.RocksDBName(); got != "kXXH3" {
		t.Errorf("RocksDBName(Default) = %q", got)
	}
	if got, err := ParseType("kXXH3"); err != nil || got != XXH3 {
		t.Errorf("ParseType(kXXH3) = %v, %v", got, err)
	}
	// An invalid value renders as written.
	if got := Type(9).String(); got != "ChecksumType(9)" {
		t.Errorf("String(9) = %q", got)
	}
	if got := Type(9).RocksDBName(); got != "ChecksumType(9)" {
		t.Errorf("RocksDBName(9) = %q", got)
	}
}

func TestInvalidType(t *testing.T) {
	for _, n := range []uint8{7, 123, 255} {
		typ := Type(n)
		if typ.Valid() {
			t.Errorf("Type(%d).Valid()", n)
		}
		err := typ.Check()
		if !errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("Type(%d).Check() = %v, want ErrInvalidArgument", n, err)
		}
		// The value as written, and the constants' names.
		msg := err.Error()
		if !strings.Contains(msg, "ChecksumType("+strconv.Itoa(int(n))+")") {
			t.Errorf("error %q does not name the value %d", msg, n)
		}
		if !strings.Contains(msg, "Default, None, CRC32c, XXHash, XXHash64, XXH3, CRC64") {
			t.Errorf("error %q does not list the valid types", msg)
		}
		if Block(typ, []byte("x"), 0) != 0 || Value(typ, []byte("x")) != 0 || Sum64(typ, []byte("x")) != 0 ||
			KV(typ, []byte("k"), 1, []byte("v")) != 0 {
			t.Errorf("Type(%d): checksum functions must return 0 for invalid types", n)
		}
	}
	// ParseType's errors are in the command line's terms: the input and
	// RocksDB's numbers with their names.
	for _, n := range []int{6, 123, 255} {
		got, err := ParseType(strconv.Itoa(n))
		if !errors.Is(err, ErrInvalidArgument) || got != Default {
			t.Errorf("ParseType(%d) = %v, %v; want Default and ErrInvalidArgument", n, got, err)
			continue
		}
		msg := err.Error()
		if !strings.Contains(msg, "unknown checksum type "+strconv.Itoa(n)) {
			t.Errorf("error %q does not name the value %d", msg, n)
		}
		for c := uint8(0); c < 6; c++ {
			if !strings.Contains(msg, strconv.Itoa(int(c))+" ("+TypeFromCode(c).String()+")") {
				t.Errorf("error %q does not list %d (%s)", msg, c, TypeFromCode(c))
			}
		}
	}
	for _, s := range []string{"foo", "", "256", "-1", "kxxh", "crc", "xxh3x", "4x", "default", "default(xxh3)"} {
		got, err := ParseType(s)
		if !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("ParseType(%q) = %v, %v; want ErrInvalidArgument", s, got, err)
			continue
		}
		if got != Default || !strings.Contains(err.Error(), `"`+s+`"`) || !strings.Contains(err.Error(), "4 (xxh3)") {
			t.Errorf("ParseType(%q) error %q should name the input and list the valid types", s, err)
		}
	}
}
