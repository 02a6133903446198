package manifest

import (
	"errors"
	"testing"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/vigildb/vigil/internal/base"
)

// CURRENT must hold "MANIFEST-" and digits and a newline, nothing else.
func TestReadCurrent(t *testing.T) {
	for content, want := range map[string]uint64{
		"MANIFEST-000005\n": 5, "MANIFEST-1\n": 1, "MANIFEST-18446744073709551615\n": 1<<64 - 1,
		"MANIFEST-000005": 0, "MANIFEST-\n": 0, "MANIFEST-+5\n": 0, "MANIFEST-5\n\n": 0, "manifest-5\n": 0,
		"MANIFEST-18446744073709551616\n": 0, "": 0, "MANIFEST-5 \n": 0,
	} {
		fs := vfs.NewMem()
		f, err := fs.Create(CurrentName)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write([]byte(content)); err != nil {
			t.Fatal(err)
		}
		f.Close()
		name, num, err := ReadCurrent(fs, "")
		switch {
		case want == 0 && !errors.Is(err, base.ErrCorruption):
			t.Errorf("CURRENT %q: %q, %d, %v; want ErrCorruption", content, name, num, err)
		case want != 0 && (err != nil || num != want || name+"\n" != content):
			t.Errorf("CURRENT %q: %q, %d, %v; want %d", content, name, num, err, want)
		}
	}
	if _, _, err := ReadCurrent(vfs.NewMem(), ""); err == nil || errors.Is(err, base.ErrCorruption) {
		t.Errorf("a missing CURRENT: %v, want a not-found error", err)
	}
}
