package tests

import (
	"errors"
	"fmt"
	"github.com/vigildb/vigil/internal/private"
	"strings"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/vigildb/vigil"
)

type recordingLogger struct {
	mu    sync.Mutex
	lines []string
}

func (l *recordingLogger) Infof(f string, a ...any) {
	l.mu.Lock()
	l.lines = append(l.lines, "I "+fmt.Sprintf(f, a...))
	l.mu.Unlock()
}

func (l *recordingLogger) Errorf(f string, a ...any) {
	l.mu.Lock()
	l.lines = append(l.lines, "E "+fmt.Sprintf(f, a...))
	l.mu.Unlock()
}

// The listener hears flushes, compactions, WAL switches and the corruption
// a read finds; Options.Logger gets the info log instead of the LOG file.
func TestEventListenerAndLogger(t *testing.T) {
	fs := vfs.NewMem()
	var mu sync.Mutex
	var events []string
	var corrupt []error
	add := func(s string) { mu.Lock(); events = append(events, s); mu.Unlock() }
	l := &vigil.EventListener{
		FlushEnd:        func(i vigil.FlushInfo) { add(fmt.Sprintf("flush %d entries err=%v", i.Entries, i.Err)) },
		CompactionEnd:   func(i vigil.CompactionInfo) { add(fmt.Sprintf("compaction L%d->L%d", i.Level, i.OutputLevel)) },
		WALCreated:      func(i vigil.WALInfo) { add(fmt.Sprintf("wal %d", i.LogNum)) },
		CorruptionFound: func(err error) { mu.Lock(); corrupt = append(corrupt, err); mu.Unlock() },
	}
	lg := &recordingLogger{}
	db, err := vigil.Open("db", &vigil.Options{FS: fs, EventListener: l, Logger: lg, ParanoidMemoryChecks: true, MemtableProtectionBytesPerKey: 8})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 100; i++ {
		if err := db.Put([]byte(fmt.Sprintf("k%03d", i)), []byte("v"), nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := db.Compact(nil, nil); err != nil {
		t.Fatal(err)
	}
	if err := db.Put([]byte("x"), []byte("value"), nil); err != nil {
		t.Fatal(err)
	}
	private.MemtableEntryBytes(db, []byte("x"), func(_, v []byte) { v[0] ^= 1 })
	if _, err := db.Get([]byte("x")); !errors.Is(err, vigil.ErrCorruption) {
		t.Fatalf("Get of a flipped value = %v", err)
	}
	_ = db.Close() // delivers what is queued
	all := strings.Join(events, "\n")
	for _, want := range []string{"flush 100 entries err=<nil>", "compaction L0->L1", "wal "} {
		if !strings.Contains(all, want) {
			t.Errorf("no %q event in:\n%s", want, all)
		}
	}
	if len(corrupt) == 0 || !errors.Is(corrupt[0], vigil.ErrCorruption) {
		t.Errorf("corruption events: %v", corrupt)
	}
	if names, _ := fs.List("db"); strings.Contains(strings.Join(names, " "), "LOG") {
		t.Errorf("a LOG file was written although Options.Logger was set: %v", names)
	}
	if len(lg.lines) == 0 || !strings.Contains(strings.Join(lg.lines, "\n"), "flushed memtable") {
		t.Errorf("the Logger got %d lines, none about the flush", len(lg.lines))
	}
}
