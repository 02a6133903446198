package stress

import (
	"errors"
	"sync"
	"sync/atomic"

	"github.com/vigildb/vigil"
)

// Test faults: stores that misbehave in one known way, so that the tests
// can check the runner notices. They are registered in testFaults, which
// kill-mode children (re-executions of the test binary) look up by name.
func init() {
	testFaults["drop-put"] = func(s store) store { return &dropPut{store: s} }
	testFaults["stale-get"] = func(s store) store { return &staleGet{store: s, first: map[string][]byte{}} }
	testFaults["flip-get"] = func(s store) store { return &flipGet{store: s} }
	testFaults["skip-next"] = func(s store) store { return &skipNext{store: s} }
	testFaults["snapshot-latest"] = func(s store) store { return &snapshotLatest{store: s} }
	testFaults["sync-lie"] = func(s store) store { return &syncLie{store: s} }
	testFaults["unchecked-batches"] = func(s store) store { return &uncheckedBatches{store: s} }
}

// uncheckedBatches writes the batches the DB refuses as corrupt anyway: it
// applies a copy made from their records as they are now, whose
// protection, computed at Apply from those bytes, cannot see the flip. A
// DB that skips the batch check. A batch whose records no longer decode
// stays refused.
type uncheckedBatches struct{ store }

func (u *uncheckedBatches) Apply(b *vigil.Batch, o *vigil.WriteOptions) error {
	err := u.store.Apply(b, o)
	if !errors.Is(err, vigil.ErrCorruption) || errors.Is(err, vigil.ErrReadOnly) {
		return err
	}
	c := &vigil.Batch{}
	r := b.Reader()
	for {
		kind, key, value, ok := r.Next()
		if !ok {
			break
		}
		switch kind {
		case vigil.BatchPut:
			c.Put(key, value)
		case vigil.BatchDelete:
			c.Delete(key)
		case vigil.BatchDeleteRange:
			c.DeleteRange(key, value)
		}
	}
	if r.Error() != nil {
		return err
	}
	return u.store.Apply(c, o)
}

// dropPut acknowledges every 37th Put without writing it.
type dropPut struct {
	store
	n atomic.Int64
}

func (d *dropPut) Put(key, value []byte, o *vigil.WriteOptions) error {
	if d.n.Add(1)%37 == 0 {
		return nil
	}
	return d.store.Put(key, value, o)
}

// staleGet answers every 10th Get with the first value it ever read for
// the key.
type staleGet struct {
	store
	mu    sync.Mutex
	n     int
	first map[string][]byte
}

func (s *staleGet) Get(key []byte) ([]byte, error) {
	v, err := s.store.Get(key)
	if err != nil {
		return v, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n++
	old, ok := s.first[string(key)]
	if !ok {
		s.first[string(key)] = append([]byte(nil), v...)
	} else if s.n%10 == 0 {
		return append([]byte(nil), old...), nil
	}
	return v, nil
}

// flipGet flips one bit of every 61st value Get returns.
type flipGet struct {
	store
	n atomic.Int64
}

func (f *flipGet) Get(key []byte) ([]byte, error) {
	v, err := f.store.Get(key)
	if err == nil && len(v) > 0 && f.n.Add(1)%61 == 0 {
		v[len(v)/2] ^= 0x10
	}
	return v, err
}

// skipNext makes every 41st Next of an iterator skip an entry.
type skipNext struct {
	store
	n atomic.Int64
}

func (s *skipNext) NewIter(o *vigil.IterOptions) (iterator, error) {
	it, err := s.store.NewIter(o)
	if err != nil {
		return nil, err
	}
	return &skipIter{iterator: it, n: &s.n}, nil
}

type skipIter struct {
	iterator
	n *atomic.Int64
}

func (it *skipIter) Next() bool {
	if it.n.Add(1)%41 == 0 && !it.iterator.Next() {
		return false
	}
	return it.iterator.Next()
}

// snapshotLatest makes snapshot reads see the latest state.
type snapshotLatest struct{ store }

func (s *snapshotLatest) NewSnapshot() snapshot {
	return &latestSnap{snapshot: s.store.NewSnapshot(), db: s.store}
}

type latestSnap struct {
	snapshot
	db store
}

func (l *latestSnap) Get(key []byte) ([]byte, error) { return l.db.Get(key) }

// syncLie acknowledges synced writes without syncing them.
type syncLie struct{ store }

func (s *syncLie) Put(key, value []byte, _ *vigil.WriteOptions) error {
	return s.store.Put(key, value, vigil.NoSync)
}

func (s *syncLie) Delete(key []byte, _ *vigil.WriteOptions) error {
	return s.store.Delete(key, vigil.NoSync)
}

func (s *syncLie) DeleteRange(start, end []byte, _ *vigil.WriteOptions) error {
	return s.store.DeleteRange(start, end, vigil.NoSync)
}

func (s *syncLie) Apply(b *vigil.Batch, _ *vigil.WriteOptions) error {
	return s.store.Apply(b, vigil.NoSync)
}
