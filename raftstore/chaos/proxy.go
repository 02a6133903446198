package chaos

import (
	"net"
	"sync"
	"time"
)

// Link is the state of one direction of the network between two nodes:
// what the proxy does with the bytes that one node sends to another.
type Link struct {
	// Cut closes the link's connections and every new one at once: the
	// sender sees a reset or a refused dial, as from a crashed peer.
	Cut bool
	// Drop reads and discards what the sender writes and delivers nothing
	// back: the sender sees timeouts, as behind a partition that loses
	// packets. Connections that dropped bytes are closed when the link
	// comes back (their streams are no longer whole).
	Drop bool
	// Delay holds every chunk of bytes this long before delivering it.
	Delay time.Duration
}

// Proxy forwards the TCP connections one node dials to another node (one
// direction of a pair: node i's dials of node j), doing to them what its
// Link says. Raft's transport sends requests and reads their responses on
// the connections it dials, so cutting or dropping both directions of a
// pair separates the two nodes completely, and one direction alone makes
// an asymmetric fault.
//
// Concurrency: every method may be called from any goroutine.
type Proxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	link  Link
	conns map[*proxyConn]struct{}
	done  bool
	wg    sync.WaitGroup
}

// proxyConn is one forwarded connection: the accepted one and the one
// dialled to the target.
type proxyConn struct {
	in, out net.Conn
	dirty   bool // bytes were dropped: close when the link comes back
}

// NewProxy listens on a free loopback port and forwards what it accepts to
// target.
func NewProxy(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target, conns: map[*proxyConn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the address that the dialling node uses instead of the target's.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Link returns the link's state.
func (p *Proxy) Link() Link {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.link
}

// SetLink changes the link's state: a cut closes the open connections, and
// a link that stops dropping closes the connections that lost bytes.
func (p *Proxy) SetLink(l Link) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.link = l
	for c := range p.conns {
		if l.Cut || (c.dirty && !l.Drop) {
			p.closeLocked(c)
		}
	}
}

// Close stops the proxy and closes its connections.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.done = true
	for c := range p.conns {
		p.closeLocked(c)
	}
	p.mu.Unlock()
	err := p.ln.Close()
	p.wg.Wait()
	return err
}

func (p *Proxy) closeLocked(c *proxyConn) {
	_ = c.in.Close()
	if c.out != nil {
		_ = c.out.Close()
	}
	delete(p.conns, c)
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.done || p.link.Cut {
			p.mu.Unlock()
			_ = in.Close()
			continue
		}
		c := &proxyConn{in: in}
		p.conns[c] = struct{}{}
		p.mu.Unlock()
		p.wg.Add(1)
		go p.serve(c)
	}
}

// serve dials the target and copies both ways until either side ends.
func (p *Proxy) serve(c *proxyConn) {
	defer p.wg.Done()
	out, err := net.DialTimeout("tcp", p.target, 2*time.Second)
	p.mu.Lock()
	if _, open := p.conns[c]; !open || err != nil {
		if err == nil {
			_ = out.Close()
		}
		if open {
			p.closeLocked(c)
		}
		p.mu.Unlock()
		return
	}
	c.out = out
	p.mu.Unlock()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); p.pipe(c, c.in, out) }()
	go func() { defer wg.Done(); p.pipe(c, out, c.in) }()
	wg.Wait()
	p.mu.Lock()
	if _, open := p.conns[c]; open {
		p.closeLocked(c)
	}
	p.mu.Unlock()
}

// pipe copies src to dst chunk by chunk, applying the link's state as it
// is when each chunk arrives; on its way out it closes both connections.
func (p *Proxy) pipe(c *proxyConn, src, dst net.Conn) {
	defer func() {
		p.mu.Lock()
		if _, open := p.conns[c]; open {
			p.closeLocked(c)
		}
		p.mu.Unlock()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			l := p.link
			if l.Drop {
				c.dirty = true
			}
			p.mu.Unlock()
			switch {
			case l.Cut:
				return
			case l.Drop:
				continue
			case l.Delay > 0:
				time.Sleep(l.Delay)
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
