package stress

import (
	"fmt"
	"sort"
	"strings"
	"sync"
)

// kstate is one state of a key: the version of the write that produced it
// and whether that write deleted the key. Version 0 is "never written".
// Deleted states compare equal whatever their version, because a reader
// cannot tell two deletions apart.
type kstate struct {
	ver uint32
	del bool
}

var neverWritten = kstate{ver: 0, del: true}

// same reports whether a reader could observe a and b as the same thing.
func (a kstate) same(b kstate) bool {
	if a.del || b.del {
		return a.del && b.del
	}
	return a.ver == b.ver
}

func (a kstate) String() string {
	if a.del {
		if a.ver == 0 {
			return "absent (never written)"
		}
		return fmt.Sprintf("absent (deleted by version %d)", a.ver)
	}
	return fmt.Sprintf("version %d", a.ver)
}

const (
	// ringLen is how many committed states of a key the oracle remembers:
	// a read checks its result against the states the key went through
	// while the read ran, and a key rarely sees more than a couple of
	// writes during one read. Reads spanning more commits are counted as
	// unverifiable rather than guessed at.
	ringLen = 8
	// maxPending bounds the writes of one key that are in flight or failed
	// and not yet resolved by a verification. Writers of a key are
	// serialized, so at most one is in flight; the rest failed.
	maxPending = 4
)

// keyOracle is the expected state of one key.
type keyOracle struct {
	// commits counts the writes committed to the oracle; ring holds the
	// states after the last ringLen of them: ring[commits%ringLen] is the
	// current state.
	commits uint32
	ring    [ringLen]kstate
	// pending are writes issued and not acknowledged: in flight, or failed
	// (an error leaves a write's fate unknown until the next verification).
	pending  [maxPending]kstate
	npending uint8
	// overflow is set when more writes were pending than fit; until the
	// next verification any state of the key is accepted (and counted as
	// unverifiable).
	overflow bool
	// nextVer is the version the next write of the key takes. Versions
	// never repeat, even when a crash loses writes, so a value read back
	// always names exactly one write.
	nextVer uint32
}

// keyView is a reader's copy of a keyOracle, taken before or after a read.
type keyView struct {
	commits  uint32
	ring     [ringLen]kstate
	pending  [maxPending]kstate
	npending uint8
	overflow bool
}

// stripe serializes the writers of its keys and guards their oracle state.
type stripe struct {
	// wmu is held by a writer from before it marks its keys pending until
	// it has committed or failed them, so that the writes of one key are
	// totally ordered and a key has at most one write in flight.
	wmu sync.Mutex
	// mu guards the keyOracle entries of the stripe's keys; it is held only
	// for the few instructions that copy or update them, so readers never
	// wait for a DB call.
	mu sync.Mutex
	_  [48]byte // keep stripes on separate cache lines
}

// oracle is the expected state of every key of the key space.
//
// Concurrency: safe for concurrent use. Writers call lock for the keys of
// a write (which takes the stripes' wmu in ascending order, so writers
// cannot deadlock), then begin/commit/fail per key. Readers call view
// before and after their DB read; a result is correct if it matches a state
// the key held at some moment between the two views, or a pending write's.
// Verification (resolve) runs with every worker stopped.
//
// Invariant: for every key, the committed states in ring are the states
// the DB had, in order, as acknowledged writes made them; a write is in
// pending from before its DB call until its acknowledgement (commit) or
// until a verification settles it.
type oracle struct {
	keys    []keyOracle
	stripes []stripe
}

func newOracle(n int) *oracle {
	ns := n
	if ns > 4096 {
		ns = 4096
	}
	o := &oracle{keys: make([]keyOracle, n), stripes: make([]stripe, ns)}
	for i := range o.keys {
		o.keys[i].ring[0] = neverWritten
		o.keys[i].nextVer = 1
	}
	return o
}

func (o *oracle) stripeOf(k int) *stripe { return &o.stripes[k%len(o.stripes)] }

// lock takes the writer locks of keys (which may repeat) and returns the
// function that releases them.
func (o *oracle) lock(keys []int) (unlock func()) { return lockStripes(o.stripes, keys) }

// lockStripes takes the writer locks (wmu) of the stripes of keys, in
// ascending order so that writers cannot deadlock, and returns the
// function that releases them. Key k belongs to stripe k%len(stripes).
func lockStripes(stripes []stripe, keys []int) (unlock func()) {
	idx := make([]int, 0, len(keys))
	for _, k := range keys {
		idx = append(idx, k%len(stripes))
	}
	sort.Ints(idx)
	n := 0
	for i, s := range idx {
		if i == 0 || s != idx[n-1] {
			idx[n] = s
			n++
		}
	}
	idx = idx[:n]
	for _, s := range idx {
		stripes[s].wmu.Lock()
	}
	return func() {
		for i := len(idx) - 1; i >= 0; i-- {
			stripes[idx[i]].wmu.Unlock()
		}
	}
}

// begin allocates the next version of key k for a write that deletes it
// (del) or sets it, and marks the write pending. The caller holds k's
// writer lock.
func (o *oracle) begin(k int, del bool) kstate {
	s := o.stripeOf(k)
	s.mu.Lock()
	ko := &o.keys[k]
	st := kstate{ver: ko.nextVer, del: del}
	ko.nextVer++
	if int(ko.npending) < maxPending {
		ko.pending[ko.npending] = st
		ko.npending++
	} else {
		ko.overflow = true
	}
	s.mu.Unlock()
	return st
}

// dropPending removes write st from the key's pending writes, if there.
// Its stripe's lock is held.
func (ko *keyOracle) dropPending(st kstate) {
	for i := 0; i < int(ko.npending); i++ {
		if ko.pending[i] == st {
			copy(ko.pending[i:], ko.pending[i+1:ko.npending])
			ko.npending--
			return
		}
	}
}

// commit records that the write st of key k was acknowledged: it is now the
// key's state. A write that failed is simply never committed: it stays
// pending, as the DB may or may not hold it, until a verification settles
// the key (resolve).
func (o *oracle) commit(k int, st kstate) {
	s := o.stripeOf(k)
	s.mu.Lock()
	ko := &o.keys[k]
	ko.dropPending(st)
	ko.commits++
	ko.ring[ko.commits%ringLen] = st
	s.mu.Unlock()
}

// abort records that the write st of key k is known not to have happened
// (a batch Apply refused before writing anything): it leaves the pending
// writes, and the key's state stays what it was. The caller holds k's
// writer lock.
func (o *oracle) abort(k int, st kstate) {
	s := o.stripeOf(k)
	s.mu.Lock()
	o.keys[k].dropPending(st)
	s.mu.Unlock()
}

// view copies the state of key k.
func (o *oracle) view(k int, v *keyView) {
	s := o.stripeOf(k)
	s.mu.Lock()
	ko := &o.keys[k]
	v.commits = ko.commits
	v.ring = ko.ring
	v.pending = ko.pending
	v.npending = ko.npending
	v.overflow = ko.overflow
	s.mu.Unlock()
}

// nextVersion returns the version the next write of k would take.
func (o *oracle) nextVersion(k int) uint32 {
	s := o.stripeOf(k)
	s.mu.Lock()
	defer s.mu.Unlock()
	return o.keys[k].nextVer
}

// resolve makes st, found by a verification, the state of key k and drops
// its pending writes. Every worker is stopped.
func (o *oracle) resolve(k int, st kstate) {
	ko := &o.keys[k]
	if ko.ring[ko.commits%ringLen] != st {
		ko.commits++
		ko.ring[ko.commits%ringLen] = st
	}
	ko.npending = 0
	ko.overflow = false
	if st.ver >= ko.nextVer {
		// Only a corrupt version could get here; keep versions unique.
		ko.nextVer = st.ver + 1
	}
}

// current returns the committed state of every key (workers stopped).
func (o *oracle) current() []kstate {
	out := make([]kstate, len(o.keys))
	for i := range o.keys {
		out[i] = o.keys[i].ring[o.keys[i].commits%ringLen]
	}
	return out
}

// load sets the committed states and next versions, as read from a state
// file (workers not started).
func (o *oracle) load(states []kstate, next []uint32) {
	for i := range o.keys {
		ko := &o.keys[i]
		*ko = keyOracle{nextVer: next[i]}
		ko.ring[0] = states[i]
	}
}

// verdict is the outcome of checking one observation.
type verdict int

const (
	verdictOK verdict = iota
	// verdictUnverifiable: too many commits happened during the read, or
	// the key overflowed its pending slots; the result was not judged.
	verdictUnverifiable
	verdictWrong
)

// check judges got, observed by a read that ran between views pre and post.
func check(pre, post *keyView, got kstate) verdict {
	if pre.overflow || post.overflow {
		return verdictUnverifiable
	}
	if post.commits-pre.commits >= ringLen {
		return verdictUnverifiable
	}
	for c := pre.commits; ; c++ {
		if post.ring[c%ringLen].same(got) {
			return verdictOK
		}
		if c == post.commits {
			break
		}
	}
	for i := 0; i < int(pre.npending); i++ {
		if pre.pending[i].same(got) {
			return verdictOK
		}
	}
	for i := 0; i < int(post.npending); i++ {
		if post.pending[i].same(got) {
			return verdictOK
		}
	}
	return verdictWrong
}

// expected describes what a read between pre and post could return.
func expected(pre, post *keyView) string {
	var parts []string
	seen := map[kstate]bool{}
	add := func(s kstate, note string) {
		if seen[s] {
			return
		}
		seen[s] = true
		parts = append(parts, s.String()+note)
	}
	if post.commits-pre.commits < ringLen {
		for c := pre.commits; ; c++ {
			add(post.ring[c%ringLen], "")
			if c == post.commits {
				break
			}
		}
	}
	for i := 0; i < int(pre.npending); i++ {
		add(pre.pending[i], " (write in flight or failed)")
	}
	for i := 0; i < int(post.npending); i++ {
		add(post.pending[i], " (write in flight or failed)")
	}
	return strings.Join(parts, " or ")
}
