package skiplist

// orderUser: internal keys whose user keys a base.Comparer orders. Its
// searches run in loops of their own, the built-in ones' with the comparer's
// abbreviations (userAbbrevAt, userAbbrevOf) in place of the built-in 8-byte
// loads, so that the loops of the built-in orders need no test for it (see
// the package doc, "Abbreviated keys").

import "encoding/binary"

// userAbbrevOf is the comparer's abbreviation of a probe's user key, 0 (a
// tie with every node) if the comparer has no AbbreviatedKey.
func (l *Skiplist) userAbbrevOf(prefix []byte) uint64 {
	if l.uabbrev == nil {
		return 0
	}
	return l.uabbrev(prefix)
}

// userAbbrevAt is the comparer's abbreviation of the user key of the node at
// off, computed from the key bytes in the node, never stored: a corrupted key
// byte changes it as it changes what Compare sees. The node must be in
// bounds. A key shorter than its trailer (corruption) is abbreviated whole,
// as cmpUserAt and compareUser compare it; a key length that runs past the
// arena is cut at the arena's end, so the abbreviation never reads outside it
// (validating paths check the extent first, and report it).
func (l *Skiplist) userAbbrevAt(off uint32) uint64 {
	if l.uabbrev == nil {
		return 0
	}
	ks, kl := l.keySpan(off)
	s := min(int(ks), len(l.buf))
	n := int(kl)
	if n >= 8 {
		n -= 8
	}
	e := min(s+n, len(l.buf))
	return l.uabbrev(l.buf[s:e:e])
}

// compareUser is Compare under orderUser: user keys by the comparer, then
// trailers descending. A key shorter than the trailer (only possible through
// corruption) compares whole, by the comparer.
func (l *Skiplist) compareUser(a, b []byte) int {
	na, nb := len(a)-8, len(b)-8
	if na < 0 || nb < 0 {
		return l.cmp(a, b)
	}
	if c := l.cmp(a[:na], b[:nb]); c != 0 {
		return c
	}
	return compareTrailers(binary.LittleEndian.Uint64(a[na:]), binary.LittleEndian.Uint64(b[nb:]))
}

// cmpUserAt is cmpProbe under orderUser: the probe (user key prefix,
// trailer) against the key of the node at off, in full (callers compared
// the abbreviations). >0 means the node sorts before the probe.
func (l *Skiplist) cmpUserAt(prefix []byte, trailer uint64, off uint32) int {
	k := l.keyAt(off)
	n := len(k) - 8
	if n < 0 {
		return l.cmp(prefix, k)
	}
	if c := l.cmp(prefix, k[:n]); c != 0 {
		return c
	}
	return compareTrailers(trailer, binary.LittleEndian.Uint64(k[n:]))
}

// cmpUserAbbrev is cmpProbeAbbrev under orderUser: the comparer's
// abbreviations first (pa is the probe's), then cmpUserAt.
func (l *Skiplist) cmpUserAbbrev(prefix []byte, trailer, pa uint64, off uint32) int {
	na := l.userAbbrevAt(off)
	switch {
	case na < pa:
		return 1
	case na > pa:
		return -1
	}
	return l.cmpUserAt(prefix, trailer, off)
}

// findUser is find under orderUser.
func (l *Skiplist) findUser(prefix []byte, trailer uint64) (lt, ge uint32) {
	pa := l.userAbbrevOf(prefix)
	x, nx, bigger := l.head, l.tail, l.tail
	for lvl := int(l.height.Load()) - 1; lvl >= 0; lvl-- {
		for {
			nx = l.loadNext(x, lvl)
			if nx == l.tail || nx == bigger {
				break
			}
			na := l.userAbbrevAt(nx)
			if na < pa || (na == pa && l.cmpUserAt(prefix, trailer, nx) > 0) {
				x = nx
				continue
			}
			bigger = nx
			break
		}
	}
	return x, nx
}

// userAbbrevChecked is userAbbrevAt for a validating walk that reached nd
// through a link of level lvl from x: it checks first that nd is a node
// inside the arena, with its key and value inside it too.
func (l *Skiplist) userAbbrevChecked(x, nd uint32, lvl int) (uint64, error) {
	if !l.linkInBounds(nd, lvl) {
		return 0, l.linkError(x, nd, lvl)
	}
	if err := l.checkExtent(nd); err != nil {
		return 0, err
	}
	return l.userAbbrevAt(nd), nil
}

// findValidatedUser is findValidated under orderUser, with its checks: the
// order of every link the walk moves past, and one look ahead from the node
// that ends it.
func (l *Skiplist) findValidatedUser(prefix []byte, trailer uint64) (lt, ge uint32, err error) {
	pa := l.userAbbrevOf(prefix)
	x, nx, bigger := l.head, l.tail, l.tail
	var xa, ba uint64
	for lvl := int(l.height.Load()) - 1; lvl >= 0; lvl-- {
		for {
			nx = l.loadNext(x, lvl)
			if nx == l.tail || nx == bigger {
				break
			}
			na, err := l.userAbbrevChecked(x, nx, lvl)
			if err != nil {
				return 0, 0, err
			}
			if na > pa || (na == pa && l.cmpUserAt(prefix, trailer, nx) <= 0) {
				bigger, ba = nx, na
				break
			}
			// Moving past nx: x < nx is not implied, check it.
			if x != l.head {
				if err := l.checkPair(x, xa, nx, na, "search"); err != nil {
					return 0, 0, err
				}
			}
			x, xa = nx, na
		}
	}
	if nx != l.tail {
		if nn := l.loadNext(nx, 0); nn != l.tail {
			nna, err := l.userAbbrevChecked(nx, nn, 0)
			if err != nil {
				return 0, 0, err
			}
			if err := l.checkPair(nx, ba, nn, nna, "search end"); err != nil {
				return 0, 0, err
			}
		}
	}
	return x, nx, nil
}

// spliceAtUser is spliceAt under orderUser, whose searches use no link
// summaries (its links carry 0); pr.pa is the comparer's abbreviation of
// the probe.
func (l *Skiplist) spliceAtUser(pr *probe, lvl int, start uint32, validate bool) (sp splice, eq bool, err error) {
	x := start
	var xa uint64
	if validate && x != l.head {
		// start was reached by a validated search, or is a cached splice
		// node whose extent the inserter checked.
		xa = l.userAbbrevAt(x)
	}
	for {
		nx, ns := l.loadStep(x, lvl)
		if nx == l.tail {
			return splice{x, nx, ns}, false, nil
		}
		var na uint64
		if validate {
			if na, err = l.userAbbrevChecked(x, nx, lvl); err != nil {
				return splice{}, false, err
			}
		} else {
			na = l.userAbbrevAt(nx)
		}
		c := 1
		if na > pr.pa {
			c = -1
		} else if na == pr.pa {
			c = l.cmpUserAt(pr.prefix, pr.trailer, nx)
		}
		if c <= 0 {
			return splice{x, nx, ns}, c == 0, nil
		}
		if validate && x != l.head {
			if err := l.checkPair(x, xa, nx, na, "insert search"); err != nil {
				return splice{}, false, err
			}
		}
		x, xa = nx, na
	}
}
