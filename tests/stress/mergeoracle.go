package stress

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
	"sync"
)

// The merges mode's values and oracle (see merges.go).
//
// Every operand names the write that produced it. With the append
// operator a Set's value is the token "S<key>.<version>[.<i>]/<filler>;"
// and a merge operand the token "M<key>.<version>[.<i>];" (i: the
// operation's index in its batch, when not 0), so a value read back is the
// list of writes since the last Set, Delete or DeleteRange of the key, in
// order, and is compared byte for byte with the one the key's history
// gives. With the counter operator (uint64add) a Set's value and an
// operand are 8-byte little-endian words drawn from a hash of (key,
// version, index): a sum read back matches the one the history gives, and
// with 64-bit random terms two different sets of writes give the same sum
// with probability about 2^-64 — a wrong sum is a lost, doubled or
// foreign operand.

// mop is one operation of a write in the merges mode: set ('s'), merge
// ('m') or delete ('d') key a, or delete the keys [a, b) ('r').
type mop struct {
	kind byte
	a, b int
}

// mergeCodec makes the operands of one merges run and folds them as the
// run's operator does. It does not call the operator: it is the model the
// DB's answers are checked against.
type mergeCodec struct {
	counter bool
	// filler is the maximum filler length of a Set's value (append).
	filler int
}

// operand returns the bytes op number idx of the write of version ver of
// key k writes: the value of a set, the operand of a merge.
func (c mergeCodec) operand(k int, ver uint32, idx int, set bool) []byte {
	s := uint64(0)
	if set {
		s = 1
	}
	h := mix64(uint64(k)<<8|uint64(idx&0xff), uint64(ver)<<1|s)
	if c.counter {
		return binary.LittleEndian.AppendUint64(make([]byte, 0, 8), h)
	}
	tag := byte('M')
	if set {
		tag = 'S'
	}
	b := make([]byte, 0, 24)
	b = append(b, tag)
	b = strconv.AppendInt(b, int64(k), 10)
	b = append(b, '.')
	b = strconv.AppendUint(b, uint64(ver), 10)
	if idx > 0 {
		b = append(b, '.')
		b = strconv.AppendInt(b, int64(idx), 10)
	}
	if set {
		b = append(b, '/')
		for j := 0; j < int((h>>32)%uint64(c.filler+1)); j++ {
			b = append(b, 'a'+byte((h>>(8*(j%8))+uint64(j))%26))
		}
	}
	return append(b, ';')
}

// merge returns existing (nil: no value) with operand merged into it.
func (c mergeCodec) merge(existing, operand []byte) []byte {
	if c.counter {
		var sum uint64
		if existing != nil {
			sum = binary.LittleEndian.Uint64(existing)
		}
		return binary.LittleEndian.AppendUint64(make([]byte, 0, 8), sum+binary.LittleEndian.Uint64(operand))
	}
	out := make([]byte, 0, len(existing)+len(operand))
	return append(append(out, existing...), operand...)
}

// mstate is a state of a key in the merges mode: the kstate of the write
// that left it (version; deleted) and its value (nil when deleted).
type mstate struct {
	st  kstate
	val []byte
	// chain counts the merge operands on top of the last Set (or of
	// nothing) in val.
	chain int
}

// apply returns the state op number idx (o) of the write of version ver
// of key k leaves, from cur. The caller sets the result's kstate.
func (c mergeCodec) apply(cur mstate, o mop, k int, ver uint32, idx int) mstate {
	switch o.kind {
	case 's':
		return mstate{val: c.operand(k, ver, idx, true)}
	case 'm':
		if cur.st.del {
			cur = mstate{}
		}
		return mstate{val: c.merge(cur.val, c.operand(k, ver, idx, false)), chain: cur.chain + 1}
	}
	return mstate{st: kstate{del: true}}
}

// describe renders a value for reports: the counter as a number, the
// append list as its tokens, each marked "!" if it is not one the runner
// wrote for key k.
func (c mergeCodec) describe(k int, val []byte, present bool) string {
	if !present {
		return "absent"
	}
	if c.counter {
		if len(val) != 8 {
			return fmt.Sprintf("%d bytes %x (not a counter)", len(val), val)
		}
		return fmt.Sprintf("counter %#016x", binary.LittleEndian.Uint64(val))
	}
	toks := bytes.SplitAfter(val, []byte(";"))
	var parts []string
	for i, t := range toks {
		if len(t) == 0 {
			continue
		}
		if len(toks) > 14 && i == 6 {
			parts = append(parts, fmt.Sprintf("...(%d more)...", len(toks)-12))
		}
		if len(toks) > 14 && i >= 6 && i < len(toks)-6 {
			continue
		}
		parts = append(parts, c.describeToken(k, t))
	}
	return fmt.Sprintf("[%s] (%d bytes)", strings.Join(parts, " "), len(val))
}

// describeToken renders one append token: "S3.17" or "M3.18.2", with "!"
// if its bytes are not the ones the runner writes for it.
func (c mergeCodec) describeToken(k int, t []byte) string {
	s := string(t)
	name, _, _ := strings.Cut(strings.TrimSuffix(s, ";"), "/")
	if len(name) < 2 || (name[0] != 'S' && name[0] != 'M') {
		return strconv.Quote(s) + "!"
	}
	f := strings.Split(name[1:], ".")
	var n [3]uint64
	ok := len(f) == 2 || len(f) == 3
	for i := 0; ok && i < len(f); i++ {
		var err error
		n[i], err = strconv.ParseUint(f[i], 10, 32)
		ok = err == nil
	}
	if !ok || !bytes.Equal(c.operand(int(n[0]), uint32(n[1]), int(n[2]), name[0] == 'S'), t) || int(n[0]) != k {
		return strconv.Quote(s) + "!"
	}
	return name
}

// mergeOracle is the expected state of every key of a merges run: per
// key, the states it went through since the last verification, with
// their values, and its writes in flight.
//
// Concurrency: safe for concurrent use, like oracle: writers lock their
// keys (lock), read the current state (current), mark the write pending
// (pend) and commit it once acknowledged; readers take a view before and
// after their DB read. A view shares the history's backing array: states
// are only ever appended (by the key's one writer) until a verification
// (resolve, workers stopped) starts a new history.
type mergeOracle struct {
	keys    []mergeKey
	stripes []stripe
}

// mergeKey is one key's part of the mergeOracle.
type mergeKey struct {
	// hist[0] is the state the last verification found; each committed
	// write appends the state it left.
	hist []mstate
	// pending are writes issued and not acknowledged: in flight, or
	// failed during a crash (in doubt until the crash check).
	pending []mstate
	nextVer uint32
}

// mergeView is a reader's copy of a key's oracle state.
type mergeView struct {
	hist    []mstate
	pending []mstate
}

func newMergeOracle(n int) *mergeOracle {
	o := &mergeOracle{keys: make([]mergeKey, n), stripes: make([]stripe, min(n, 4096))}
	for i := range o.keys {
		o.keys[i] = mergeKey{hist: []mstate{{st: neverWritten}}, nextVer: 1}
	}
	return o
}

func (o *mergeOracle) mu(k int) *sync.Mutex { return &o.stripes[k%len(o.stripes)].mu }

// lock takes the writer locks of keys and returns their release.
func (o *mergeOracle) lock(keys []int) (unlock func()) { return lockStripes(o.stripes, keys) }

// current returns key k's committed state and allocates the version of
// the caller's write of it. The caller holds k's writer lock, so the
// state stays current until the write is committed.
func (o *mergeOracle) current(k int) (mstate, uint32) {
	mu := o.mu(k)
	mu.Lock()
	defer mu.Unlock()
	ko := &o.keys[k]
	ver := ko.nextVer
	ko.nextVer++
	return ko.hist[len(ko.hist)-1], ver
}

// pend marks the write that leaves st pending.
func (o *mergeOracle) pend(k int, st mstate) {
	mu := o.mu(k)
	mu.Lock()
	o.keys[k].pending = append(o.keys[k].pending, st)
	mu.Unlock()
}

// commit records that the pending write that leaves st was acknowledged.
func (o *mergeOracle) commit(k int, st mstate) {
	mu := o.mu(k)
	mu.Lock()
	defer mu.Unlock()
	ko := &o.keys[k]
	for i := range ko.pending {
		if ko.pending[i].st == st.st {
			ko.pending = append(ko.pending[:i], ko.pending[i+1:]...)
			break
		}
	}
	ko.hist = append(ko.hist, st)
}

// view copies key k's state into v.
func (o *mergeOracle) view(k int, v *mergeView) {
	mu := o.mu(k)
	mu.Lock()
	ko := &o.keys[k]
	v.hist = ko.hist[:len(ko.hist):len(ko.hist)]
	v.pending = append(v.pending[:0], ko.pending...)
	mu.Unlock()
}

// states returns every state key k may be in (workers stopped): its
// history since the last verification, then its pending writes.
func (o *mergeOracle) states(k int) []mstate {
	ko := &o.keys[k]
	return append(ko.hist[:len(ko.hist):len(ko.hist)], ko.pending...)
}

// resolve makes st, found by a verification, key k's state (workers
// stopped).
func (o *mergeOracle) resolve(k int, st mstate) {
	ko := &o.keys[k]
	ko.hist = []mstate{st}
	ko.pending = nil
	if st.st.ver >= ko.nextVer {
		ko.nextVer = st.st.ver + 1
	}
}

// base returns every key's committed kstate (workers stopped).
func (o *mergeOracle) base() []kstate {
	out := make([]kstate, len(o.keys))
	for k := range o.keys {
		out[k] = o.keys[k].hist[len(o.keys[k].hist)-1].st
	}
	return out
}

// candidates returns the states a read between views pre and post may
// return: those the key held between them, and the writes pending at
// either.
func candidates(pre, post *mergeView) []mstate {
	c := append([]mstate(nil), post.hist[len(pre.hist)-1:]...)
	c = append(c, pre.pending...)
	return append(c, post.pending...)
}

// matchState returns the index in cands of a state a read returning val
// (present) shows, or -1.
func matchState(cands []mstate, val []byte, present bool) int {
	for i, c := range cands {
		if c.st.del {
			if !present {
				return i
			}
			continue
		}
		if present && bytes.Equal(c.val, val) {
			return i
		}
	}
	return -1
}

// describeStates renders states for a report's "expected": the last
// ones, newest last.
func (c mergeCodec) describeStates(k int, cands []mstate) string {
	var parts []string
	if len(cands) > 8 {
		parts = append(parts, fmt.Sprintf("(%d older states)", len(cands)-8))
		cands = cands[len(cands)-8:]
	}
	for _, s := range cands {
		if s.st.del {
			parts = append(parts, s.st.String())
			continue
		}
		parts = append(parts, fmt.Sprintf("%v: %s", s.st, c.describe(k, s.val, true)))
	}
	return strings.Join(parts, " or ")
}
