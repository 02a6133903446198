package vigil

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
	"github.com/cockroachdb/pebble/vfs"
	"github.com/vigildb/vigil/checksum"
)

// batchPart is where a part of one record lies in a batch's buffer.
type batchPart struct{ off, len int }

// batchRecordParts parses the encoding by hand (not with batchReader, whose
// checks are under test) and returns, per record, its kind byte, key
// length varint, key, value length varint and value (the last two empty
// for a deletion).
func batchRecordParts(data []byte) []map[string]batchPart {
	var out []map[string]batchPart
	for off := batchHeaderLen; off < len(data); {
		p := map[string]batchPart{"kind": {off, 1}}
		kind := data[off]
		off++
		n, w := binary.Uvarint(data[off:])
		p["keylen"] = batchPart{off, w}
		off += w
		p["key"] = batchPart{off, int(n)}
		off += int(n)
		if kind != 0 { // not a deletion
			n, w = binary.Uvarint(data[off:])
			p["valuelen"] = batchPart{off, w}
			off += w
			p["value"] = batchPart{off, int(n)}
			off += int(n)
		}
		out = append(out, p)
	}
	return out
}

// flipBatch flips bit of the byte at index at within part (a part of
// record rec, or "header") of the batch's buffer. Before Apply, the caller
// stamps the header first (Reader does), as Apply will.
func flipBatch(b *Batch, part string, rec, at, bit int) error {
	if part == "header" {
		b.data[at] ^= 1 << bit
		return nil
	}
	recs := batchRecordParts(b.data)
	if rec >= len(recs) {
		return fmt.Errorf("record %d of %d", rec, len(recs))
	}
	p, ok := recs[rec][part]
	if !ok || at >= p.len {
		return fmt.Errorf("record %d has no byte %d in its %s", rec, at, part)
	}
	b.data[p.off+at] ^= 1 << bit
	return nil
}

// TestBatchProtection runs testdata/batch_protection: what a protected
// batch's Apply does with a bit flipped in its buffer before Apply (refused,
// nothing written, DB still writable), after the WAL write and before the
// memtable copy (DB read-only, the WAL has it whole), for large batches,
// batches made without a DB, and batches of another DB's setting.
//
//	open [prot=N] [memprot=N] [type=name] [wbs=bytes]   a new DB on a new MemFS
//	reopen [prot=N] [type=name]                           close, open again
//	batch name [zero] [of=other]   lines "put k v", "del k", "range a b";
//	                               zero: a Batch{}; of=other: NewBatch of DB other
//	large name n=N                 N puts k00000=v00000...; also a DB of its own
//	flip name part rec=i at=j bit=k  part: kind keylen key valuelen value header
//	apply name [flip-after-wal=part,rec,at,bit]
//	get k...                       values, "not found" or the error
//	put k v                        DB.Put
//	metrics                        the counters this feature touches
func TestBatchProtection(t *testing.T) {
	bt := &batchProtTest{t: t, others: map[string]*DB{}, batches: map[string]*Batch{}}
	defer bt.close()
	datadriven.RunTest(t, "testdata/batch_protection", func(t *testing.T, td *datadriven.TestData) string {
		bt.t = t
		switch td.Cmd {
		case "open", "reopen":
			return bt.open(td)
		case "other":
			o := &Options{FS: vfs.NewMem()}
			batchTestOptions(t, td, o)
			d, err := Open("db", o)
			if err != nil {
				t.Fatal(err)
			}
			bt.others[td.CmdArgs[0].Key] = d
			return ""
		case "batch":
			return bt.batch(td)
		case "large":
			var n int
			td.ScanArgs(t, "n", &n)
			b := bt.db.NewBatch()
			for i := 0; i < n; i++ {
				b.Put([]byte(fmt.Sprintf("k%05d", i)), []byte(fmt.Sprintf("v%05d", i)))
			}
			bt.batches[td.CmdArgs[0].Key] = b
			return fmt.Sprintf("%d records, flushable %v", b.Count(), b.memSize > bt.db.opts.WriteBufferSize/flushableBatchFraction)
		case "flip":
			var rec, at, bit int
			td.MaybeScanArgs(t, "rec", &rec)
			td.ScanArgs(t, "at", &at)
			td.ScanArgs(t, "bit", &bit)
			b := bt.batches[td.CmdArgs[0].Key]
			b.Reader()
			if err := flipBatch(b, td.CmdArgs[1].Key, rec, at, bit); err != nil {
				t.Fatal(err)
			}
			return ""
		case "apply":
			return bt.apply(td)
		case "put":
			return errText(bt.db.Put([]byte(td.CmdArgs[0].Key), []byte(td.CmdArgs[1].Key), nil))
		case "get":
			return bt.get(td)
		case "metrics":
			m := bt.db.Metrics()
			return fmt.Sprintf("batch corruptions %d, memtable corruptions %d, WAL records %d, visible seq %d\nbackground error: %v",
				m.BatchCorruptions, m.MemTable.Corruptions, m.WAL.Records, m.VisibleSeq, m.BackgroundError)
		}
		return fmt.Sprintf("unknown command %q", td.Cmd)
	})
}

// batchProtTest is TestBatchProtection's state: the DB under test, other
// DBs whose batches are applied to it, and the named batches.
type batchProtTest struct {
	t       *testing.T
	fs      vfs.FS
	db      *DB
	opts    *Options
	others  map[string]*DB
	batches map[string]*Batch
}

func (bt *batchProtTest) close() {
	for _, o := range bt.others {
		o.Close()
	}
	if bt.db != nil {
		bt.db.Close()
	}
}

// errText renders an error with the sentinels it wraps.
func errText(err error) string {
	if err == nil {
		return "ok"
	}
	var kinds []string
	for _, s := range []error{ErrCorruption, ErrReadOnly, ErrInvalidArgument} {
		if errors.Is(err, s) {
			kinds = append(kinds, strings.TrimPrefix(s.Error(), "vigil: "))
		}
	}
	return fmt.Sprintf("error [%s]: %v", strings.Join(kinds, ", "), err)
}

// open is "open" (a new DB) and "reopen" (the same files).
func (bt *batchProtTest) open(td *datadriven.TestData) string {
	if bt.db != nil {
		if err := bt.db.Close(); err != nil && td.Cmd == "reopen" {
			return "close: " + errText(err)
		}
	}
	if td.Cmd == "open" {
		bt.fs, bt.opts = vfs.NewMem(), &Options{DisableAutomaticCompactions: true}
		bt.opts.WriteBufferSize = 1 << 20
	}
	batchTestOptions(bt.t, td, bt.opts)
	var err error
	o := bt.opts
	bt.db, err = Open("db", &Options{FS: bt.fs, ChecksumType: o.ChecksumType, WriteBufferSize: o.WriteBufferSize,
		BatchProtectionBytesPerKey: o.BatchProtectionBytesPerKey, MemtableProtectionBytesPerKey: o.MemtableProtectionBytesPerKey,
		DisableAutomaticCompactions: true})
	if err != nil {
		return "open: " + errText(err)
	}
	return ""
}

// batch is "batch NAME [zero] [of=DB]": a batch of the input's lines.
func (bt *batchProtTest) batch(td *datadriven.TestData) string {
	t := bt.t
	b := bt.db.NewBatch()
	if td.HasArg("zero") {
		b = &Batch{}
	}
	if td.HasArg("of") {
		var of string
		td.ScanArgs(t, "of", &of)
		b = bt.others[of].NewBatch()
	}
	for _, l := range strings.Split(strings.TrimSpace(td.Input), "\n") {
		f := strings.Fields(l)
		switch {
		case len(f) == 3 && f[0] == "put":
			b.Put([]byte(f[1]), []byte(f[2]))
		case len(f) == 2 && f[0] == "del":
			b.Delete([]byte(f[1]))
		case len(f) == 3 && f[0] == "range":
			b.DeleteRange([]byte(f[1]), []byte(f[2]))
		default:
			t.Fatalf("bad batch line %q", l)
		}
	}
	bt.batches[td.CmdArgs[0].Key] = b
	return fmt.Sprintf("%d records, %d protection bytes", b.Count(), b.protBytes)
}

// apply is "apply NAME [flip-after-wal=(part, rec, at, bit)]".
func (bt *batchProtTest) apply(td *datadriven.TestData) string {
	b := bt.batches[td.CmdArgs[0].Key]
	if td.HasArg("flip-after-wal") {
		var part string
		var rec, at, bit int
		td.ScanArgs(bt.t, "flip-after-wal", &part, &rec, &at, &bit)
		bt.db.testingHooks = &testingHooks{beforeApply: func() {
			if err := flipBatch(b, part, rec, at, bit); err != nil {
				bt.t.Error(err)
			}
		}}
		defer func() { bt.db.testingHooks = nil }()
	}
	return errText(bt.db.Apply(b, nil))
}

// get is "get KEY...".
func (bt *batchProtTest) get(td *datadriven.TestData) string {
	var out []string
	for _, a := range td.CmdArgs {
		v, err := bt.db.Get([]byte(a.Key))
		switch {
		case errors.Is(err, ErrNotFound):
			out = append(out, a.Key+": not found")
		case err != nil:
			out = append(out, a.Key+": "+errText(err))
		default:
			out = append(out, a.Key+"="+string(v))
		}
	}
	return strings.Join(out, "\n")
}

// batchTestOptions reads the protection options of an open command.
func batchTestOptions(t *testing.T, td *datadriven.TestData, o *Options) {
	if td.HasArg("prot") {
		td.ScanArgs(t, "prot", &o.BatchProtectionBytesPerKey)
	}
	if td.HasArg("memprot") {
		td.ScanArgs(t, "memprot", &o.MemtableProtectionBytesPerKey)
	}
	if td.HasArg("wbs") {
		td.ScanArgs(t, "wbs", &o.WriteBufferSize)
	}
	if td.HasArg("type") {
		var name string
		td.ScanArgs(t, "type", &name)
		ct, err := checksum.ParseType(name)
		if err != nil {
			t.Fatal(err)
		}
		o.ChecksumType = ct
	}
}

// TestBatchProtectionSweep flips every bit of a small protected batch, one
// at a time, before Apply, for each protection size, with a small and a
// large (flushable) batch: a flip in the records must make Apply fail with
// ErrCorruption and write nothing (checked by Get before and after a
// reopen), a flip in the header (which Apply rewrites) must change nothing.
// With fewer than 8 bytes a flip may pass with probability 2^-8N; the
// misses are counted and bounded, not forbidden.
func TestBatchProtectionSweep(t *testing.T) {
	for _, large := range []bool{false, true} {
		for _, n := range []int{1, 2, 4, 8} {
			t.Run(fmt.Sprintf("large=%v/bytes=%d", large, n), func(t *testing.T) {
				sweepBatchFlips(t, n, large)
			})
		}
	}
}

// sweepBatchFlips is one case of TestBatchProtectionSweep.
func sweepBatchFlips(t *testing.T, n int, large bool) {
	fs := vfs.NewMem()
	opts := &Options{BatchProtectionBytesPerKey: n, ChecksumType: ChecksumCRC32c, WriteBufferSize: 64 << 10}
	db := openMem(t, fs, opts)
	// build makes batch i: a put, a delete and a range deletion of keys
	// of its own (and, large, enough puts of other keys to be flushable).
	build := func(i int) *Batch {
		b := db.NewBatch()
		b.Put([]byte(fmt.Sprintf("p%04d", i)), []byte(fmt.Sprintf("value-%d", i)))
		b.Delete([]byte(fmt.Sprintf("d%04d", i)))
		b.DeleteRange([]byte(fmt.Sprintf("r%04d", i)), []byte(fmt.Sprintf("r%04dz", i)))
		for j := 0; large && j < 400; j++ {
			b.Put([]byte(fmt.Sprintf("x%04d-%03d", i, j)), make([]byte, 64))
		}
		return b
	}
	b0 := build(0)
	if flushable := b0.memSize > opts.WriteBufferSize/flushableBatchFraction; flushable != large {
		t.Fatalf("flushable %v, want %v", flushable, large)
	}
	bits := 8 * b0.Len()
	if large {
		bits = 8 * 64 // the header and the first records
	}
	refused, missed := 0, 0
	var refusedKeys []string
	passed := map[string]string{} // key: value, of the batches applied whole
	for bit := 0; bit < bits; bit++ {
		b := build(bit)
		b.Reader()
		b.data[bit/8] ^= 1 << (bit % 8)
		key := fmt.Sprintf("p%04d", bit)
		err := db.Apply(b, nil)
		switch {
		case err == nil && bit < 8*batchHeaderLen:
			passed[key] = fmt.Sprintf("value-%d", bit)
		case err == nil:
			missed++
		case errors.Is(err, ErrCorruption):
			refused++
			refusedKeys = append(refusedKeys, key)
		default:
			t.Fatalf("bit %d: Apply = %v", bit, err)
		}
	}
	if bg := db.Metrics().BackgroundError; bg != nil {
		t.Fatalf("a refused batch stopped the DB: %v", bg)
	}
	if got := db.Metrics().BatchCorruptions; got != int64(refused) {
		t.Fatalf("BatchCorruptions %d, %d refused", got, refused)
	}
	// 2^-8N per flip: 8 bytes never miss; one byte misses about 1.5 of
	// ~400 record bits, and at most 8 in this fixed sweep.
	if limit := map[int]int{1: 8, 2: 1, 4: 0, 8: 0}[n]; missed > limit {
		t.Fatalf("%d of %d record flips passed Apply with %d protection bytes", missed, bits-8*batchHeaderLen, n)
	}
	if len(passed) != 8*batchHeaderLen {
		t.Fatalf("%d of %d header flips applied the batch", len(passed), 8*batchHeaderLen)
	}
	t.Logf("%d bits: %d refused, %d header flips without effect, %d missed", bits, refused, len(passed), missed)
	check := func(when string) {
		for _, k := range refusedKeys {
			if _, err := db.Get([]byte(k)); !errors.Is(err, ErrNotFound) {
				t.Fatalf("%s: %s of a refused batch: %v, want ErrNotFound", when, k, err)
			}
		}
		for k, v := range passed {
			mustGet(t, db, k, v)
		}
	}
	check("before reopening")
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openMem(t, fs, opts)
	defer db.Close()
	check("reopened")
}

// TestBatchProtectionAdoption: a batch made without a DB takes the DB's
// protection at its first Apply (a flip before it passes, one after a
// Reset does not), and a pooled batch of DB.Put is protected.
func TestBatchProtectionAdoption(t *testing.T) {
	db := openMem(t, vfs.NewMem(), &Options{BatchProtectionBytesPerKey: 4})
	defer db.Close()
	b := &Batch{}
	b.Put([]byte("a"), []byte("1"))
	b.Reader()
	if err := flipBatch(b, "value", 0, 0, 1); err != nil {
		t.Fatal(err)
	}
	if err := db.Apply(b, nil); err != nil {
		t.Fatalf("an unprotected batch flipped before its first Apply: %v (it has nothing to be checked against)", err)
	}
	mustGet(t, db, "a", "3")
	if b.protBytes != 4 || b.protType != ChecksumXXH3 {
		t.Fatalf("after Apply the batch keeps %d bytes of %s", b.protBytes, b.protType)
	}
	b.Reset()
	b.Put([]byte("b"), []byte("2"))
	b.Reader()
	if err := flipBatch(b, "key", 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	if err := db.Apply(b, nil); !errors.Is(err, ErrCorruption) {
		t.Fatalf("a flip after the batch took the DB's protection: %v, want ErrCorruption", err)
	}
	mustNotFound(t, db, "b")
	mustNotFound(t, db, "c")
	if err := db.Put([]byte("p"), []byte("q"), nil); err != nil {
		t.Fatal(err)
	}
	mustGet(t, db, "p", "q")
}

// TestBatchProtectionOptions: the option is validated as the memtable's is,
// and written in the OPTIONS file.
func TestBatchProtectionOptions(t *testing.T) {
	for _, c := range []struct {
		o    Options
		want string
	}{
		{Options{BatchProtectionBytesPerKey: 3}, "BatchProtectionBytesPerKey = 3: write batch per key-value protection supports only 0, 1, 2, 4 or 8"},
		{Options{BatchProtectionBytesPerKey: 16}, "BatchProtectionBytesPerKey = 16"},
		{Options{BatchProtectionBytesPerKey: 8, ChecksumType: ChecksumNone}, "BatchProtectionBytesPerKey = 8 needs a checksum type"},
	} {
		o := c.o
		err := o.EnsureDefaults().Validate()
		if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%d bytes, %s: %v, want %q", c.o.BatchProtectionBytesPerKey, c.o.ChecksumType, err, c.want)
		}
	}
	for _, n := range []int{0, 1, 2, 4, 8} {
		o := &Options{BatchProtectionBytesPerKey: n}
		if err := o.EnsureDefaults().Validate(); err != nil {
			t.Errorf("%d bytes: %v", n, err)
		}
		if s := o.String(); !strings.Contains(s, "batch_protection_bytes_per_key="+strconv.Itoa(n)+"\n") {
			t.Errorf("OPTIONS of %d bytes lack the option:\n%s", n, s)
		}
	}
}

// BenchmarkBatchPut measures Batch.Put of a 16-byte key and a 100-byte
// value (db_bench's sizes) without and with protection, the batch reset
// every 1000 entries (fillbatch's size).
func BenchmarkBatchPut(b *testing.B) {
	key, value := make([]byte, 16), make([]byte, 100)
	for _, n := range []int{0, 1, 8} {
		b.Run(fmt.Sprintf("protection=%d", n), func(b *testing.B) {
			bt := &Batch{}
			bt.setProtection(ChecksumXXH3, n)
			i := 0
			for b.Loop() {
				binary.BigEndian.PutUint64(key, uint64(i))
				bt.Put(key, value)
				if i++; i%1000 == 0 {
					bt.Reset()
				}
			}
		})
	}
}

// BenchmarkPutBatchProtection is BenchmarkPut (DB.Put of sequential keys,
// WAL on) without and with batch protection, and with memtable protection,
// which batch protection's memtable check replaces rather than adds to.
func BenchmarkPutBatchProtection(b *testing.B) {
	for _, mem := range []int{0, 8} {
		for _, n := range []int{0, 8} {
			b.Run(fmt.Sprintf("memtable=%d/batch=%d", mem, n), func(b *testing.B) {
				benchPuts(b, func(o *Options) { o.MemtableProtectionBytesPerKey, o.BatchProtectionBytesPerKey = mem, n })
			})
		}
	}
}
