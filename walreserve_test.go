package vigil

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/vigildb/vigil/checksum"
)

// TestWALReserveNeedsChecksums: a WAL keeps zeros past its records only
// when its fragments carry checksums. Without them, a process killed inside
// a write(2) left an append's first pages before the zeros, and recovery
// read that as a whole record ending in zeros (vigil stress --crash=kill,
// checksum none); without the reserve the file ends where the write stopped.
func TestWALReserveNeedsChecksums(t *testing.T) {
	for _, tc := range []struct {
		ct      checksum.Type
		reserve bool
	}{{checksum.None, false}, {checksum.XXH3, true}, {checksum.CRC32c, true}} {
		t.Run(tc.ct.String(), func(t *testing.T) {
			dir := t.TempDir()
			db, err := Open(dir, &Options{ChecksumType: tc.ct})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			for i := 0; i < 10; i++ {
				if err := db.Put([]byte{byte(i)}, []byte("value"), &WriteOptions{Sync: true}); err != nil {
					t.Fatal(err)
				}
			}
			logical := db.wal.live.Size()
			matches, err := filepath.Glob(filepath.Join(dir, "*.log"))
			if err != nil || len(matches) == 0 {
				t.Fatalf("no WAL in %s (%v)", dir, err)
			}
			var size int64
			for _, m := range matches {
				st, err := os.Stat(m)
				if err != nil {
					t.Fatal(err)
				}
				size = max(size, st.Size())
			}
			if got := size > logical; got != tc.reserve {
				t.Fatalf("WAL file of %d bytes for a %d-byte log: reserve %v, want %v", size, logical, got, tc.reserve)
			}
		})
	}
}
