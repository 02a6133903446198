package bench

// Engine is the store kvbench drives. Vigil's is in this package; the
// bench/peers module adds Pebble's, so both run the very same workload code.
type Engine interface {
	// Put writes key=value; sync asks for a durable write.
	Put(key, value []byte, sync bool) error
	// Delete removes key.
	Delete(key []byte, sync bool) error
	// Get reads key; found reports presence, n the value's length. buf is
	// the calling thread's scratch buffer, which an engine may use to read
	// without allocating (as db_bench reuses its value string); nil is
	// allowed.
	Get(key []byte, buf *[]byte) (found bool, n int, err error)
	// NewIter returns an iterator over the whole store.
	NewIter() (Iter, error)
	// Flush writes memtables to disk and waits.
	Flush() error
	// Compact compacts the whole key space and waits.
	Compact() error
	// Metrics renders engine statistics (--stats).
	Metrics() string
	Close() error
}

// Iter is the iterator kvbench needs.
type Iter interface {
	First() bool
	Last() bool
	Next() bool
	Prev() bool
	SeekGE(key []byte) bool
	Valid() bool
	Key() []byte
	Value() []byte
	Close() error
}

// EngineOptions are the engine settings kvbench passes on, named after
// db_bench's flags.
type EngineOptions struct {
	Dir                           string
	WriteBufferSize               int
	ChecksumType                  int // RocksDB numbering: 0 none ... 4 xxh3, 5 crc64
	ParanoidMemoryChecks          bool
	MemtableProtectionBytesPerKey int
	BlockSize                     int
	CacheSize                     int64  // bytes; 0 disables
	BloomBits                     int    // 0 disables
	Compression                   string // "none" or "snappy"
	DisableWAL                    bool
	// Fresh says the benchmark wants an empty store (fillseq, fillrandom
	// without --use_existing_db): the engine's directory was removed.
	Fresh bool
	// DisableAutomaticCompactions keeps the LSM as the workload shaped it.
	DisableAutomaticCompactions bool
}

// Opener opens an engine.
type Opener func(o EngineOptions) (Engine, error)
