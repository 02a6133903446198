package stress

import (
	"fmt"
	"sort"

	"github.com/vigildb/vigil"
)

// store is the part of *vigil.DB the runner uses. It is an interface so
// that tests can put a deliberately broken DB in front of the runner and
// check that the runner notices (a stress runner that cannot fail is
// worthless).
type store interface {
	Get(key []byte) ([]byte, error)
	Put(key, value []byte, o *vigil.WriteOptions) error
	Delete(key []byte, o *vigil.WriteOptions) error
	DeleteRange(start, end []byte, o *vigil.WriteOptions) error
	Apply(b *vigil.Batch, o *vigil.WriteOptions) error
	NewIter(o *vigil.IterOptions) (iterator, error)
	NewSnapshot() snapshot
	Flush() error
	Compact(start, end []byte) error
	Checkpoint(dir string) error
	Ingest(paths []string) error
	IngestAndExcise(paths []string, start, end []byte) error
	Verify() error
	Metrics() *vigil.Metrics
	Close() error
	// DB returns the real DB, for the corruption-injection hooks.
	DB() *vigil.DB
}

// mergeStore is a store that takes merge operands too: what the merges
// mode (merges.go) uses.
type mergeStore interface {
	store
	Merge(key, operand []byte, o *vigil.WriteOptions) error
}

// iterator is the part of *vigil.Iterator the runner uses.
type iterator interface {
	First() bool
	Last() bool
	SeekGE(key []byte) bool
	SeekLT(key []byte) bool
	Next() bool
	Prev() bool
	Valid() bool
	Key() []byte
	Value() []byte
	Error() error
	Close() error
}

// snapshot is the part of *vigil.Snapshot the runner uses.
type snapshot interface {
	Get(key []byte) ([]byte, error)
	NewIter(o *vigil.IterOptions) (iterator, error)
	Close() error
}

// dbStore adapts *vigil.DB to store.
type dbStore struct{ db *vigil.DB }

func (s dbStore) Get(key []byte) ([]byte, error) { return s.db.Get(key) }
func (s dbStore) Put(key, value []byte, o *vigil.WriteOptions) error {
	return s.db.Put(key, value, o)
}
func (s dbStore) Delete(key []byte, o *vigil.WriteOptions) error { return s.db.Delete(key, o) }
func (s dbStore) Merge(key, operand []byte, o *vigil.WriteOptions) error {
	return s.db.Merge(key, operand, o)
}
func (s dbStore) DeleteRange(start, end []byte, o *vigil.WriteOptions) error {
	return s.db.DeleteRange(start, end, o)
}
func (s dbStore) Apply(b *vigil.Batch, o *vigil.WriteOptions) error { return s.db.Apply(b, o) }
func (s dbStore) Flush() error                                      { return s.db.Flush() }
func (s dbStore) Compact(start, end []byte) error                   { return s.db.Compact(start, end) }
func (s dbStore) Checkpoint(dir string) error                       { return s.db.Checkpoint(dir) }
func (s dbStore) Ingest(paths []string) error                       { return s.db.Ingest(paths) }
func (s dbStore) IngestAndExcise(paths []string, start, end []byte) error {
	return s.db.IngestAndExcise(paths, start, end)
}
func (s dbStore) Verify() error           { return s.db.Verify() }
func (s dbStore) Metrics() *vigil.Metrics { return s.db.Metrics() }
func (s dbStore) Close() error            { return s.db.Close() }
func (s dbStore) DB() *vigil.DB           { return s.db }

func (s dbStore) NewIter(o *vigil.IterOptions) (iterator, error) {
	it, err := s.db.NewIter(o)
	if err != nil {
		return nil, err
	}
	return it, nil
}

func (s dbStore) NewSnapshot() snapshot { return snapStore{s.db.NewSnapshot()} }

type snapStore struct{ s *vigil.Snapshot }

func (s snapStore) Get(key []byte) ([]byte, error) { return s.s.Get(key) }
func (s snapStore) Close() error                   { return s.s.Close() }

func (s snapStore) NewIter(o *vigil.IterOptions) (iterator, error) {
	it, err := s.s.NewIter(o)
	if err != nil {
		return nil, err
	}
	return it, nil
}

// testFaults maps a fault name to a wrapper that makes a store misbehave.
// It is filled by the package's tests only; production binaries have none,
// so a child process of the vigil binary refuses an unknown fault.
var testFaults = map[string]func(store) store{}

// wrapTestFault applies the named test fault, if any.
func wrapTestFault(name string, s store) (store, error) {
	if name == "" {
		return s, nil
	}
	w, ok := testFaults[name]
	if !ok {
		names := make([]string, 0, len(testFaults))
		for n := range testFaults {
			names = append(names, n)
		}
		sort.Strings(names)
		return nil, fmt.Errorf("unknown test fault %q (known: %v)", name, names)
	}
	return w(s), nil
}
