package chaos

import (
	"bufio"
	"net"
	"testing"
	"time"
)

// echoServer answers every line with the same line.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if _, err := c.Write([]byte(line)); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// roundTrip sends a line on c and waits up to wait for its echo.
func roundTrip(c net.Conn, r *bufio.Reader, wait time.Duration) (time.Duration, error) {
	start := time.Now()
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return 0, err
	}
	_ = c.SetReadDeadline(time.Now().Add(wait))
	_, err := r.ReadString('\n')
	return time.Since(start), err
}

func TestProxy(t *testing.T) {
	p, err := NewProxy(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	dial := func() (net.Conn, *bufio.Reader) {
		t.Helper()
		c, err := net.Dial("tcp", p.Addr())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c, bufio.NewReader(c)
	}
	c, r := dial()
	if _, err := roundTrip(c, r, 5*time.Second); err != nil {
		t.Fatalf("through a healthy link: %v", err)
	}

	p.SetLink(Link{Delay: 100 * time.Millisecond})
	// Both directions are delayed: at least 2 × 100 ms.
	if d, err := roundTrip(c, r, 5*time.Second); err != nil || d < 200*time.Millisecond {
		t.Fatalf("through a delayed link: %v after %v, want an echo after >= 200ms", err, d)
	}

	p.SetLink(Link{Drop: true})
	if _, err := roundTrip(c, r, 300*time.Millisecond); err == nil {
		t.Fatal("an echo through a dropping link")
	}
	p.SetLink(Link{})
	// The connection lost bytes, so healing closed it; a new one works.
	if _, err := roundTrip(c, r, 5*time.Second); err == nil {
		t.Fatal("a connection that lost bytes still works after the heal")
	}
	c, r = dial()
	if _, err := roundTrip(c, r, 5*time.Second); err != nil {
		t.Fatalf("a new connection after the heal: %v", err)
	}

	p.SetLink(Link{Cut: true})
	if _, err := roundTrip(c, r, 5*time.Second); err == nil {
		t.Fatal("an open connection survived a cut")
	}
	c, r = dial() // accepted, then closed at once
	if _, err := roundTrip(c, r, 5*time.Second); err == nil {
		t.Fatal("a new connection works through a cut link")
	}
	p.SetLink(Link{})
	c, r = dial()
	if _, err := roundTrip(c, r, 5*time.Second); err != nil {
		t.Fatalf("after healing a cut: %v", err)
	}
}
