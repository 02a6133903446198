package stress

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"strings"
	"sync"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/vigildb/vigil/internal/base"
	"github.com/vigildb/vigil/internal/vfsutil"
)

// opStatus is what became of a logged operation.
type opStatus uint8

const (
	// opPending: issued, no answer yet (in flight at a crash, or the
	// process died before logging the answer).
	opPending opStatus = iota
	// opOK: acknowledged without error.
	opOK
	// opFailed: returned an error, so it may or may not have happened.
	opFailed
)

// opName says what a logged operation was, for reports.
type opName uint8

const (
	namePut opName = iota + 1
	nameDelete
	nameDeleteRange
	nameBatch
	// nameFlush is a Flush that returned: every write acknowledged before
	// it was issued is durable in an SST.
	nameFlush
	// nameClose is a Close that returned without error: every write
	// acknowledged before it is durable.
	nameClose
	// nameIngest is an Ingest or IngestAndExcise of one external table
	// setting or deleting every key of a range: atomic like a batch, and
	// durable once acknowledged (logged as synced).
	nameIngest
	// nameMerge is a DB.Merge of one operand (the merges mode, merges.go).
	nameMerge
	// nameTxn is a Txn's commit (the merges mode).
	nameTxn
	nameMax
)

var opNames = [...]string{namePut: "put", nameDelete: "delete", nameDeleteRange: "delete-range", nameBatch: "batch", nameFlush: "flush", nameClose: "close", nameIngest: "ingest", nameMerge: "merge", nameTxn: "txn"}

func (n opName) String() string {
	if n > 0 && n < nameMax {
		return opNames[n]
	}
	return fmt.Sprintf("op(%d)", uint8(n))
}

// barrier reports whether the operation is a durability barrier rather
// than a write.
func (n opName) barrier() bool { return n == nameFlush || n == nameClose }

// keyWrite is the effect of a write operation on one key: the state the key
// takes if the operation happened. A batch or range deletion touching a key
// several times logs only the last effect, the one a reader may observe.
type keyWrite struct {
	key uint32
	st  kstate
	// merged: the key's new state depends on its old one (the merges
	// mode: a merge operand went on top of it). For reports only; not in
	// the op log file.
	merged bool
}

// opRec is one write or barrier in the op log. inv and ack are ticks of
// the runner's logical clock (one atomic counter): inv is taken before the
// DB call, ack after it returned, so ack(a) < inv(b) proves a returned
// before b started.
type opRec struct {
	id     uint64
	name   opName
	synced bool
	status opStatus
	inv    uint64
	ack    uint64
	writes []keyWrite
}

func (o *opRec) String() string {
	var b []byte
	b = fmt.Appendf(b, "op #%d %s", o.id, o.name)
	for i, w := range o.writes {
		if i == 4 {
			b = fmt.Appendf(b, " ... (%d keys)", len(o.writes))
			break
		}
		switch {
		case w.st.del:
			b = fmt.Appendf(b, " del(%d)", w.key)
		case w.merged:
			b = fmt.Appendf(b, " merge(%d)=v%d", w.key, w.st.ver)
		default:
			b = fmt.Appendf(b, " set(%d)=v%d", w.key, w.st.ver)
		}
	}
	if o.synced {
		b = append(b, " sync"...)
	}
	switch o.status {
	case opPending:
		b = fmt.Appendf(b, " [issued at t%d, no answer]", o.inv)
	case opOK:
		b = fmt.Appendf(b, " [issued t%d, acknowledged t%d]", o.inv, o.ack)
	case opFailed:
		b = fmt.Appendf(b, " [issued t%d, failed t%d]", o.inv, o.ack)
	}
	return string(b)
}

// opLog records the writes of the current epoch (since the last
// verification) for the crash checker, and, in a kill-mode child, appends
// each intent and answer to a file before and after the DB call.
//
// Concurrency: safe for concurrent use; one mutex orders the slice and the
// file appends.
type opLog struct {
	mu     sync.Mutex
	ops    []*opRec
	nextID uint64
	file   *opLogFile
}

// begin assigns an id and the invocation tick and logs the intent. It must
// run before the DB call.
func (l *opLog) begin(o *opRec, clock func() uint64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.nextID++
	o.id = l.nextID
	o.inv = clock()
	l.ops = append(l.ops, o)
	if l.file != nil {
		return l.file.appendIntent(o)
	}
	return nil
}

// end logs the answer. ok says whether the DB call succeeded.
func (l *opLog) end(o *opRec, ok bool, clock func() uint64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	o.ack = clock()
	o.status = opFailed
	if ok {
		o.status = opOK
	}
	if l.file != nil {
		return l.file.appendAck(o)
	}
	return nil
}

// drop removes o, logged by begin, from the log instead of ending it: the
// DB refused the operation before anything of it was written, so for the
// crash checker it never happened. Only for the in-memory log: a kill-mode
// child's file has the intent already (and --corrupt-memory, the one
// caller, never runs in kill mode).
func (l *opLog) drop(o *opRec) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.file != nil {
		return fmt.Errorf("op log: cannot drop operation %d from a child's file", o.id)
	}
	for i := len(l.ops) - 1; i >= 0; i-- {
		if l.ops[i] == o {
			l.ops = append(l.ops[:i], l.ops[i+1:]...)
			return nil
		}
	}
	return fmt.Errorf("op log: operation %d to drop is not in the log", o.id)
}

// progress appends the child's operation counts to the file, for the
// parent's progress lines and summary.
func (l *opLog) progress(p progressCounts) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.file == nil {
		return nil
	}
	return l.file.appendProgress(p)
}

// progressCounts are a child's operation counts so far.
type progressCounts struct {
	ops, reads, writes, scans, faults uint64
}

// verified appends, in a kill-mode child, the state a verification found:
// the parent checks only the operations after it, against it.
func (l *opLog) verified(states []kstate) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.file == nil {
		return nil
	}
	return l.file.appendVerified(states)
}

// take returns the epoch's operations and starts a new epoch.
func (l *opLog) take() []*opRec {
	l.mu.Lock()
	defer l.mu.Unlock()
	ops := l.ops
	l.ops = nil
	return ops
}

// snapshot returns the epoch's operations so far (workers stopped).
func (l *opLog) snapshot() []*opRec {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ops
}

func (l *opLog) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.ops)
}

// # Op log file (kill mode)
//
// A kill-mode child appends every intent before its DB call and every
// answer after it, each with one write system call: data handed to the
// kernel survives a SIGKILL of the process (only a machine crash loses the
// page cache), so no fsync is needed for the parent to read them. The
// format is pinned by a golden test:
//
//	header:  "VGSOPLG1" | numKeys u32
//	record:  length u32 | crc32c(payload) u32 | payload
//	intent:  1 | id u64 | inv u64 | name u8 | flags u8 (1 = sync) |
//	         count u32 | count × (key u32 | version u32 | del u8)
//	answer:  2 | id u64 | ack u64 | status u8 (1 = ok, 2 = failed)
//	counts:  3 | ops u64 | reads u64 | writes u64 | scans u64 | faults u64
//	         (so far; progress for the parent)
//	verified: 4 | numKeys × (version u32 | del u8): the state the child
//	         verified after reopening the DB itself; the operations before
//	         it are settled by that verification
//
// Integers are little-endian. A record cut short at the end of the file
// (the process died mid-append) ends the log, and a file cut inside its
// header is an empty log; anything else malformed is corruption.

const (
	opLogMagic     = "VGSOPLG1"
	opLogHeaderLen = 12
	recIntent      = 1
	recAck         = 2
	recProgress    = 3
	recVerified    = 4
	intentFixedLen = 1 + 8 + 8 + 1 + 1 + 4
	writeLen       = 9
	ackLen         = 1 + 8 + 8 + 1
	progressLen    = 1 + 5*8
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// opLogFile appends records to an op log file.
type opLogFile struct {
	f   vfs.File
	buf []byte
}

// createOpLog creates the op log file name on fs and writes its header.
func createOpLog(fs vfs.FS, name string, numKeys int) (*opLogFile, error) {
	f, err := fs.Create(name)
	if err != nil {
		return nil, fmt.Errorf("creating op log %s: %w", name, err)
	}
	hdr := append([]byte(opLogMagic), 0, 0, 0, 0)
	binary.LittleEndian.PutUint32(hdr[8:], uint32(numKeys))
	if _, err := f.Write(hdr); err != nil {
		f.Close()
		return nil, fmt.Errorf("writing op log %s: %w", name, err)
	}
	return &opLogFile{f: f}, nil
}

func (l *opLogFile) record(payload func(b []byte) []byte) error {
	b := append(l.buf[:0], 0, 0, 0, 0, 0, 0, 0, 0)
	b = payload(b)
	binary.LittleEndian.PutUint32(b[0:4], uint32(len(b)-8))
	binary.LittleEndian.PutUint32(b[4:8], crc32.Checksum(b[8:], crcTable))
	l.buf = b
	if _, err := l.f.Write(b); err != nil {
		return fmt.Errorf("appending to the op log: %w", err)
	}
	return nil
}

func (l *opLogFile) appendIntent(o *opRec) error {
	return l.record(func(b []byte) []byte {
		b = append(b, recIntent)
		b = binary.LittleEndian.AppendUint64(b, o.id)
		b = binary.LittleEndian.AppendUint64(b, o.inv)
		flags := byte(0)
		if o.synced {
			flags |= 1
		}
		b = append(b, byte(o.name), flags)
		b = binary.LittleEndian.AppendUint32(b, uint32(len(o.writes)))
		for _, w := range o.writes {
			b = binary.LittleEndian.AppendUint32(b, w.key)
			b = binary.LittleEndian.AppendUint32(b, w.st.ver)
			del := byte(0)
			if w.st.del {
				del = 1
			}
			b = append(b, del)
		}
		return b
	})
}

func (l *opLogFile) appendAck(o *opRec) error {
	return l.record(func(b []byte) []byte {
		b = append(b, recAck)
		b = binary.LittleEndian.AppendUint64(b, o.id)
		b = binary.LittleEndian.AppendUint64(b, o.ack)
		return append(b, byte(o.status))
	})
}

func (l *opLogFile) appendProgress(p progressCounts) error {
	return l.record(func(b []byte) []byte {
		b = append(b, recProgress)
		for _, v := range []uint64{p.ops, p.reads, p.writes, p.scans, p.faults} {
			b = binary.LittleEndian.AppendUint64(b, v)
		}
		return b
	})
}

// stateEntryLenV is the size of one key's state in a verified record.
const stateEntryLenV = 5

func (l *opLogFile) appendVerified(states []kstate) error {
	return l.record(func(b []byte) []byte {
		b = append(b, recVerified)
		for _, st := range states {
			b = binary.LittleEndian.AppendUint32(b, st.ver)
			del := byte(0)
			if st.del {
				del = 1
			}
			b = append(b, del)
		}
		return b
	})
}

func (l *opLogFile) close() error { return l.f.Close() }

// opLogContents is a decoded op log.
type opLogContents struct {
	numKeys int
	// ops are the operations after the last verified record (all of
	// them if there is none); verified is that record's state, nil if
	// none; settled are the operations before it, which it settled (they
	// matter only for the versions they used).
	ops      []*opRec
	verified []kstate
	settled  []*opRec
	// progress is the last progress record the child logged.
	progress progressCounts
	// tornTail is set when the last record was cut short.
	tornTail bool
}

// decodeOpLog parses an op log read whole from the file name. Every
// length is checked before use; malformed input is an error wrapping
// base.ErrCorruption that names the file and offset.
func decodeOpLog(data []byte, name string) (*opLogContents, error) {
	if len(data) < opLogHeaderLen && strings.HasPrefix(opLogMagic, string(data[:min(len(data), 8)])) {
		// The child died between creating the file and writing its
		// header: an empty log.
		return &opLogContents{tornTail: true}, nil
	}
	if len(data) < opLogHeaderLen || string(data[:8]) != opLogMagic {
		return nil, base.CorruptionErrorf("op log %s: bad header (%d bytes)", name, len(data))
	}
	c := &opLogContents{numKeys: int(binary.LittleEndian.Uint32(data[8:12]))}
	if c.numKeys <= 0 || c.numKeys > maxKeys {
		return nil, base.CorruptionErrorf("op log %s: key space of %d keys", name, c.numKeys)
	}
	byID := map[uint64]*opRec{}
	off := opLogHeaderLen
	for off < len(data) {
		if len(data)-off < 8 {
			c.tornTail = true
			break
		}
		n := int(binary.LittleEndian.Uint32(data[off:]))
		sum := binary.LittleEndian.Uint32(data[off+4:])
		// No record is longer than an intent writing every key (a
		// verified state is smaller): a larger length is corruption, not a
		// torn tail. Nothing is allocated from a length anyway before it
		// is checked against the bytes present.
		if uint64(n) > intentFixedLen+writeLen*uint64(c.numKeys) {
			return nil, base.CorruptionErrorf("op log %s: record at offset %d has length %d", name, off, n)
		}
		if n > len(data)-off-8 {
			c.tornTail = true
			break
		}
		p := data[off+8 : off+8+n]
		if got := crc32.Checksum(p, crcTable); got != sum {
			if off+8+n == len(data) {
				c.tornTail = true
				break
			}
			return nil, base.CorruptionErrorf("op log %s: record at offset %d: checksum 0x%08x, stored 0x%08x", name, off, got, sum)
		}
		if err := c.decodeRecord(p, byID); err != nil {
			return nil, base.CorruptionErrorf("op log %s: record at offset %d: %w", name, off, err)
		}
		off += 8 + n
	}
	return c, nil
}

func (c *opLogContents) decodeRecord(p []byte, byID map[uint64]*opRec) error {
	if len(p) == 0 {
		return fmt.Errorf("empty record")
	}
	switch p[0] {
	case recIntent:
		if len(p) < intentFixedLen {
			return fmt.Errorf("intent of %d bytes", len(p))
		}
		o := &opRec{
			id:     binary.LittleEndian.Uint64(p[1:]),
			inv:    binary.LittleEndian.Uint64(p[9:]),
			name:   opName(p[17]),
			synced: p[18]&1 != 0,
		}
		if o.name == 0 || o.name >= nameMax {
			return fmt.Errorf("intent %d has unknown operation %d", o.id, p[17])
		}
		if p[18]&^1 != 0 {
			return fmt.Errorf("intent %d has unknown flags 0x%02x", o.id, p[18])
		}
		count := binary.LittleEndian.Uint32(p[19:])
		if uint64(count)*writeLen != uint64(len(p)-intentFixedLen) {
			return fmt.Errorf("intent %d says %d writes in %d bytes", o.id, count, len(p)-intentFixedLen)
		}
		if _, dup := byID[o.id]; dup {
			return fmt.Errorf("intent %d appears twice", o.id)
		}
		if count > 0 {
			o.writes = make([]keyWrite, count)
		}
		q := p[intentFixedLen:]
		for i := range o.writes {
			k := binary.LittleEndian.Uint32(q)
			if int64(k) >= int64(c.numKeys) {
				return fmt.Errorf("intent %d writes key %d outside the key space of %d", o.id, k, c.numKeys)
			}
			if q[8] > 1 {
				return fmt.Errorf("intent %d has a bad delete flag %d", o.id, q[8])
			}
			o.writes[i] = keyWrite{key: k, st: kstate{ver: binary.LittleEndian.Uint32(q[4:]), del: q[8] == 1}}
			q = q[writeLen:]
		}
		byID[o.id] = o
		c.ops = append(c.ops, o)
	case recAck:
		if len(p) != ackLen {
			return fmt.Errorf("answer of %d bytes", len(p))
		}
		id := binary.LittleEndian.Uint64(p[1:])
		o := byID[id]
		if o == nil {
			return fmt.Errorf("answer for unknown operation %d", id)
		}
		if o.status != opPending {
			return fmt.Errorf("second answer for operation %d", id)
		}
		o.ack = binary.LittleEndian.Uint64(p[9:])
		switch st := opStatus(p[17]); st {
		case opOK, opFailed:
			o.status = st
		default:
			return fmt.Errorf("answer for operation %d has unknown status %d", id, p[17])
		}
	case recVerified:
		if uint64(len(p)-1) != uint64(c.numKeys)*stateEntryLenV {
			return fmt.Errorf("verified state of %d bytes for %d keys", len(p)-1, c.numKeys)
		}
		st := make([]kstate, c.numKeys)
		for i := range st {
			e := p[1+i*stateEntryLenV:]
			if e[4] > 1 || (e[4] == 0 && binary.LittleEndian.Uint32(e) == 0) {
				return fmt.Errorf("verified state: key %d has version %d, del %d", i, binary.LittleEndian.Uint32(e), e[4])
			}
			st[i] = kstate{ver: binary.LittleEndian.Uint32(e), del: e[4] == 1}
		}
		for _, o := range c.ops {
			if o.status == opPending {
				return fmt.Errorf("verified state while operation %d has no answer", o.id)
			}
		}
		c.settled = append(c.settled, c.ops...)
		c.ops = nil
		c.verified = st
	case recProgress:
		if len(p) != progressLen {
			return fmt.Errorf("progress record of %d bytes", len(p))
		}
		c.progress = progressCounts{
			ops:    binary.LittleEndian.Uint64(p[1:]),
			reads:  binary.LittleEndian.Uint64(p[9:]),
			writes: binary.LittleEndian.Uint64(p[17:]),
			scans:  binary.LittleEndian.Uint64(p[25:]),
			faults: binary.LittleEndian.Uint64(p[33:]),
		}
	default:
		return fmt.Errorf("unknown record type %d", p[0])
	}
	return nil
}

// readOpLog reads and decodes the op log name.
func readOpLog(fs vfs.FS, name string) (*opLogContents, error) {
	data, err := readFile(fs, name)
	if err != nil {
		return nil, err
	}
	return decodeOpLog(data, name)
}

// # Expected-state file (kill mode)
//
// The parent writes the verified state of every key before it starts a
// child; the child starts its oracle from it. Pinned by a golden test:
//
//	"VGSSTAT1" | numKeys u32 | numKeys × (version u32 | nextVersion u32 | del u8) | crc32c u32
//
// The checksum covers everything before it. Written to a temporary file,
// synced, renamed into place and the directory synced, so a reader sees
// the old state or the new one.

const (
	stateMagic     = "VGSSTAT1"
	stateHeaderLen = 12
	stateEntryLen  = 9
)

func encodeState(states []kstate, next []uint32) []byte {
	b := make([]byte, 0, stateHeaderLen+len(states)*stateEntryLen+4)
	b = append(b, stateMagic...)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(states)))
	for i, s := range states {
		b = binary.LittleEndian.AppendUint32(b, s.ver)
		b = binary.LittleEndian.AppendUint32(b, next[i])
		del := byte(0)
		if s.del {
			del = 1
		}
		b = append(b, del)
	}
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, crcTable))
}

// decodeState parses a state file read whole from name.
func decodeState(data []byte, name string) ([]kstate, []uint32, error) {
	if len(data) < stateHeaderLen+4 || string(data[:8]) != stateMagic {
		return nil, nil, base.CorruptionErrorf("state file %s: bad header (%d bytes)", name, len(data))
	}
	n := binary.LittleEndian.Uint32(data[8:12])
	if n == 0 || n > maxKeys || uint64(len(data)) != stateHeaderLen+uint64(n)*stateEntryLen+4 {
		return nil, nil, base.CorruptionErrorf("state file %s: %d keys do not fit %d bytes", name, n, len(data))
	}
	body := data[:len(data)-4]
	if got, want := crc32.Checksum(body, crcTable), binary.LittleEndian.Uint32(data[len(data)-4:]); got != want {
		return nil, nil, base.CorruptionErrorf("state file %s: checksum 0x%08x at offset %d, computed 0x%08x", name, want, len(body), got)
	}
	states := make([]kstate, n)
	next := make([]uint32, n)
	for i := range states {
		off := stateHeaderLen + i*stateEntryLen
		e := data[off : off+stateEntryLen]
		states[i] = kstate{ver: binary.LittleEndian.Uint32(e), del: e[8] == 1}
		next[i] = binary.LittleEndian.Uint32(e[4:])
		if e[8] > 1 || next[i] <= states[i].ver {
			return nil, nil, base.CorruptionErrorf("state file %s: key %d at offset %d: version %d, next %d, del %d", name, i, off, states[i].ver, next[i], e[8])
		}
		if states[i].ver == 0 && !states[i].del {
			return nil, nil, base.CorruptionErrorf("state file %s: key %d at offset %d is set by version 0", name, i, off)
		}
	}
	return states, next, nil
}

// writeState replaces the state file name atomically (through name.tmp:
// the runner's own directory, which only it writes).
func writeState(fs vfs.FS, name string, states []kstate, next []uint32) error {
	if err := vfsutil.ReplaceFile(fs, name+".tmp", name, encodeState(states, next), nil); err != nil {
		return fmt.Errorf("writing state file: %w", err)
	}
	return nil
}

// readState reads and decodes the state file name.
func readState(fs vfs.FS, name string) ([]kstate, []uint32, error) {
	data, err := readFile(fs, name)
	if err != nil {
		return nil, nil, err
	}
	return decodeState(data, name)
}

// readFile reads a whole file through fs.
func readFile(fs vfs.FS, name string) ([]byte, error) {
	f, err := fs.Open(name)
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", name, err)
	}
	defer f.Close()
	data, err := io.ReadAll(f)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", name, err)
	}
	return data, nil
}
