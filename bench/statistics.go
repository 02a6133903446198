package bench

import (
	"fmt"
	"io"
	"time"

	"github.com/vigildb/vigil/internal/base"
)

// --statistics prints, at the end of the run as db_bench does, the RocksDB
// statistics Vigil can give, under RocksDB's names and in its format:
// counters of the API calls kvbench makes (counted by kvbench, as
// RocksDB counts them inside its API), the engine's own counters
// (TickerEngine), and latency histograms of Get, Write and Seek.

// batchHeader is the size of a write batch's header (sequence number and
// count), in RocksDB's WriteBatch and Vigil's Batch alike.
const batchHeader = 12

// batchBytes is the encoded size of a batch of n puts of a klen-byte key
// and vlen-byte value: what RocksDB's rocksdb.bytes.written adds per Write.
func batchBytes(n int64, klen, vlen int) int64 {
	return batchHeader + n*(1+int64(base.UvarintLen(uint64(klen)))+int64(klen)+int64(base.UvarintLen(uint64(vlen)))+int64(vlen))
}

// deleteBytes is one delete's share of a batch's encoded size.
func deleteBytes(klen int) int64 { return 1 + int64(base.UvarintLen(uint64(klen))) + int64(klen) }

// opStats are one thread's API counters and latencies; methods on a nil
// *opStats do nothing, so callers need no check when --statistics is off.
type opStats struct {
	keysWritten, keysRead      int64
	bytesWritten, bytesRead    int64
	seeks, nexts, prevs        int64
	seekFound, nextFound       int64
	prevFound, iterBytes       int64
	itersCreated, itersDeleted int64
	get, write, seek           Histogram
}

func newOpStats() *opStats { return &opStats{} }

// wrote counts a committed write of n keys whose batch encodes to size
// bytes, started at start.
func (s *opStats) wrote(n, size int64, start time.Time) {
	if s == nil {
		return
	}
	s.keysWritten += n
	s.bytesWritten += size
	s.write.Record(time.Since(start))
}

// got counts a Get.
func (s *opStats) got(found bool, vlen int, start time.Time) {
	if s == nil {
		return
	}
	s.keysRead++
	if found {
		s.bytesRead += int64(vlen)
	}
	s.get.Record(time.Since(start))
}

// seeked counts a new iterator and its first positioning (Seek, First or
// Last: all are seeks to RocksDB), started at start.
func (s *opStats) seeked(valid bool, it Iter, start time.Time) {
	if s == nil {
		return
	}
	s.itersCreated++
	s.seeks++
	if valid {
		s.seekFound++
		s.iterBytes += int64(len(it.Key()) + len(it.Value()))
	}
	s.seek.Record(time.Since(start))
}

// stepped counts a Next (forward) or Prev.
func (s *opStats) stepped(forward, valid bool, it Iter) {
	if s == nil {
		return
	}
	if forward {
		s.nexts++
	} else {
		s.prevs++
	}
	if valid {
		if forward {
			s.nextFound++
		} else {
			s.prevFound++
		}
		s.iterBytes += int64(len(it.Key()) + len(it.Value()))
	}
}

func (s *opStats) iterClosed() {
	if s != nil {
		s.itersDeleted++
	}
}

// merge adds o into s.
func (s *opStats) merge(o *opStats) {
	if s == nil || o == nil {
		return
	}
	s.keysWritten += o.keysWritten
	s.keysRead += o.keysRead
	s.bytesWritten += o.bytesWritten
	s.bytesRead += o.bytesRead
	s.seeks += o.seeks
	s.nexts += o.nexts
	s.prevs += o.prevs
	s.seekFound += o.seekFound
	s.nextFound += o.nextFound
	s.prevFound += o.prevFound
	s.iterBytes += o.iterBytes
	s.itersCreated += o.itersCreated
	s.itersDeleted += o.itersDeleted
	s.get.Merge(&o.get)
	s.write.Merge(&o.write)
	s.seek.Merge(&o.seek)
}

// tickerOrder is the order RocksDB 7.8 prints these tickers in.
var tickerOrder = []string{
	"rocksdb.block.cache.miss",
	"rocksdb.block.cache.hit",
	"rocksdb.bloom.filter.useful",
	"rocksdb.bloom.filter.full.positive",
	"rocksdb.number.keys.written",
	"rocksdb.number.keys.read",
	"rocksdb.bytes.written",
	"rocksdb.bytes.read",
	"rocksdb.number.db.seek",
	"rocksdb.number.db.next",
	"rocksdb.number.db.prev",
	"rocksdb.number.db.seek.found",
	"rocksdb.number.db.next.found",
	"rocksdb.number.db.prev.found",
	"rocksdb.db.iter.bytes.read",
	"rocksdb.no.file.opens",
	"rocksdb.stall.micros",
	"rocksdb.bloom.filter.prefix.checked",
	"rocksdb.bloom.filter.prefix.useful",
	"rocksdb.wal.bytes",
	"rocksdb.write.wal",
	"rocksdb.compact.read.bytes",
	"rocksdb.compact.write.bytes",
	"rocksdb.flush.write.bytes",
	"rocksdb.num.iterator.created",
	"rocksdb.num.iterator.deleted",
}

// tickers returns the API counters under their RocksDB names.
func (s *opStats) tickers() map[string]int64 {
	return map[string]int64{
		"rocksdb.number.keys.written":  s.keysWritten,
		"rocksdb.number.keys.read":     s.keysRead,
		"rocksdb.bytes.written":        s.bytesWritten,
		"rocksdb.bytes.read":           s.bytesRead,
		"rocksdb.number.db.seek":       s.seeks,
		"rocksdb.number.db.next":       s.nexts,
		"rocksdb.number.db.prev":       s.prevs,
		"rocksdb.number.db.seek.found": s.seekFound,
		"rocksdb.number.db.next.found": s.nextFound,
		"rocksdb.number.db.prev.found": s.prevFound,
		"rocksdb.db.iter.bytes.read":   s.iterBytes,
		"rocksdb.num.iterator.created": s.itersCreated,
		"rocksdb.num.iterator.deleted": s.itersDeleted,
	}
}

// writeStatistics prints db_bench's STATISTICS block: API counters s,
// engine counters eng (nil when the engine has none), then the histograms.
func writeStatistics(w io.Writer, s *opStats, eng map[string]int64) {
	fmt.Fprintf(w, "STATISTICS:\n")
	api := s.tickers()
	for _, name := range tickerOrder {
		v, ok := api[name]
		if !ok {
			if v, ok = eng[name]; !ok {
				continue
			}
		}
		fmt.Fprintf(w, "%s COUNT : %d\n", name, v)
	}
	for _, h := range []struct {
		name string
		h    *Histogram
	}{{"rocksdb.db.get.micros", &s.get}, {"rocksdb.db.write.micros", &s.write}, {"rocksdb.db.seek.micros", &s.seek}} {
		p := func(q float64) float64 { return us(h.h.Percentile(q)) }
		fmt.Fprintf(w, "%s P50 : %f P95 : %f P99 : %f P100 : %f COUNT : %d SUM : %d\n",
			h.name, p(50), p(95), p(99), p(100), h.h.Count(), int64(h.h.sum/1e3))
	}
	fmt.Fprintln(w)
}
