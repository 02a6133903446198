package bench

import (
	"errors"
	"fmt"

	"github.com/vigildb/vigil"
	"github.com/vigildb/vigil/checksum"
)

// OpenVigil opens Vigil as a kvbench engine.
func OpenVigil(o EngineOptions) (Engine, error) {
	opts, err := VigilOptions(o)
	if err != nil {
		return nil, err
	}
	db, err := vigil.Open(o.Dir, opts)
	if err != nil {
		return nil, err
	}
	return &vigilEngine{db: db}, nil
}

// VigilOptions maps engine options to vigil.Options.
func VigilOptions(o EngineOptions) (*vigil.Options, error) {
	ct := checksum.Type(o.ChecksumType)
	if err := ct.Check(); err != nil {
		return nil, err
	}
	opts := &vigil.Options{
		WriteBufferSize:               o.WriteBufferSize,
		ChecksumType:                  vigil.ChecksumFromType(ct),
		ParanoidMemoryChecks:          o.ParanoidMemoryChecks,
		MemtableProtectionBytesPerKey: o.MemtableProtectionBytesPerKey,
		BlockSize:                     o.BlockSize,
		BlockCacheSize:                o.CacheSize,
		BloomBitsPerKey:               o.BloomBits,
		DisableWAL:                    o.DisableWAL,
		DisableAutomaticCompactions:   o.DisableAutomaticCompactions,
	}
	if o.CacheSize <= 0 {
		opts.BlockCacheSize = -1
	}
	if o.BloomBits <= 0 {
		opts.BloomBitsPerKey = -1
	}
	switch o.Compression {
	case "none", "no", "kNoCompression":
		opts.Compression = vigil.NoCompression
	case "snappy", "kSnappyCompression", "":
		opts.Compression = vigil.SnappyCompression
	default:
		return nil, fmt.Errorf("%w: unknown compression %q (none or snappy)", vigil.ErrInvalidArgument, o.Compression)
	}
	return opts, nil
}

type vigilEngine struct {
	db *vigil.DB
}

// DB exposes the underlying DB (for tests and the stress runner).
func (e *vigilEngine) DB() *vigil.DB { return e.db }

func writeOpts(sync bool) *vigil.WriteOptions {
	if sync {
		return vigil.Sync
	}
	return nil
}

func (e *vigilEngine) Put(key, value []byte, sync bool) error {
	return e.db.Put(key, value, writeOpts(sync))
}

func (e *vigilEngine) Delete(key []byte, sync bool) error {
	return e.db.Delete(key, writeOpts(sync))
}

func (e *vigilEngine) Get(key []byte, buf *[]byte) (bool, int, error) {
	var v []byte
	var err error
	if buf != nil {
		v, err = e.db.GetAppend((*buf)[:0], key)
		*buf = v
	} else {
		v, err = e.db.Get(key)
	}
	if errors.Is(err, vigil.ErrNotFound) {
		return false, 0, nil
	}
	if err != nil {
		return false, 0, err
	}
	return true, len(v), nil
}

func (e *vigilEngine) NewIter() (Iter, error) { return e.db.NewIter(nil) }

func (e *vigilEngine) Flush() error { return e.db.Flush() }

func (e *vigilEngine) Compact() error { return e.db.Compact(nil, nil) }

func (e *vigilEngine) Metrics() string { return e.db.Metrics().String() }

func (e *vigilEngine) Close() error { return e.db.Close() }
