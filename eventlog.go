package vigil

import (
	"fmt"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/vfs"
)

// eventLog writes the human-readable LOG file of a DB directory: opens,
// flushes, rotations, compactions, stalls and errors, one timestamped line
// each. It is for people debugging a DB, not for recovery; failures to write
// it are ignored after the first (which is remembered for Metrics).
//
// Safe for concurrent use.
type eventLog struct {
	mu  sync.Mutex
	f   vfs.File
	err error
}

// openEventLog moves an existing LOG to LOG.old and starts a new one. A nil
// fs or read-only DB gets a log that discards everything.
func openEventLog(fs vfs.FS, dir string) *eventLog {
	name := makeFilename(fs, dir, fileTypeInfoLog, 0)
	if _, err := fs.Stat(name); err == nil {
		_ = fs.Rename(name, fs.PathJoin(dir, "LOG.old"))
	}
	f, err := fs.Create(name)
	if err != nil {
		return &eventLog{err: err}
	}
	return &eventLog{f: f}
}

// Infof logs one event.
func (l *eventLog) Infof(format string, args ...any) {
	if l == nil {
		return
	}
	l.write("INFO", format, args...)
}

// Errorf logs one error event.
func (l *eventLog) Errorf(format string, args ...any) {
	if l == nil {
		return
	}
	l.write("ERROR", format, args...)
}

func (l *eventLog) write(level, format string, args ...any) {
	line := fmt.Sprintf("%s %-5s %s\n", time.Now().UTC().Format("2006/01/02-15:04:05.000000"), level, fmt.Sprintf(format, args...))
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return
	}
	if _, err := l.f.Write([]byte(line)); err != nil && l.err == nil {
		l.err = err
	}
}

// Close syncs and closes the log.
func (l *eventLog) Close() error {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return nil
	}
	_ = l.f.Sync()
	err := l.f.Close()
	l.f = nil
	return err
}
