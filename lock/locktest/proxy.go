package locktest

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Proxy forwards TCP connections from a loopback port to a target. It can
// cut the path (a network partition) and restore it, freeze it (the
// target's bytes dropped while every connection stays open: a peer gone
// silent) and move it to another target (an address moved after a
// failover).
type Proxy struct {
	Addr string

	ln      net.Listener
	forward Forward

	mu     sync.Mutex
	target string
	cut    bool
	frozen bool
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup
}

// Forward copies one connection's client bytes to the target until src
// ends. Calling mute drops the target's bytes to that client from then
// on, leaving the other connections be.
type Forward func(dst io.Writer, src io.Reader, mute func()) error

// NewProxy listens on a free loopback port and forwards to target until
// Close; forward, if not nil, carries the clients' bytes.
func NewProxy(target string, forward Forward) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	if forward == nil {
		forward = func(dst io.Writer, src io.Reader, _ func()) error {
			_, err := io.Copy(dst, src)
			return err
		}
	}
	p := &Proxy{Addr: ln.Addr().String(), target: target, ln: ln, forward: forward, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// StartProxyT is NewProxy closed when the test ends.
func StartProxyT(t testing.TB, target string) *Proxy {
	t.Helper()
	p, err := NewProxy(target, nil)
	must(t, err)
	t.Cleanup(p.Close)
	return p
}

// Cut closes every forwarded connection and refuses new ones until Restore.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	p.closeConns()
}

func (p *Proxy) closeConns() {
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
}

// Restore lets connections through again.
func (p *Proxy) Restore() {
	p.mu.Lock()
	p.cut = false
	p.mu.Unlock()
}

// Freeze drops everything the target sends from now on, on every
// connection; the clients' bytes still reach it.
func (p *Proxy) Freeze() {
	p.mu.Lock()
	p.frozen = true
	p.mu.Unlock()
}

// Move sends new connections to target. With cut, the connections made so
// far are closed too (the old server's machine is gone); without, they
// stay with the old server (it is alive, demoted).
func (p *Proxy) Move(target string, cut bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.target = target
	if cut {
		p.closeConns()
	}
}

// Close stops listening and closes every connection.
func (p *Proxy) Close() {
	p.ln.Close()
	p.Cut()
	p.wg.Wait()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		cut, target := p.cut, p.target
		p.mu.Unlock()
		var out net.Conn
		if !cut {
			out, err = net.DialTimeout("tcp", target, 2*time.Second)
		}
		p.mu.Lock()
		if cut || err != nil || p.cut {
			p.mu.Unlock()
			in.Close()
			if out != nil {
				out.Close()
			}
			continue
		}
		p.conns[in], p.conns[out] = struct{}{}, struct{}{}
		p.mu.Unlock()
		muted := new(atomic.Bool)
		p.wg.Add(2)
		go func() {
			defer p.end(in, out)
			_ = p.forward(out, in, func() { muted.Store(true) })
		}()
		go p.replies(in, out, muted)
	}
}

// replies forwards the target's bytes to the client unless the proxy is
// frozen or the connection muted, when they are read and dropped.
func (p *Proxy) replies(client, server net.Conn, muted *atomic.Bool) {
	defer p.end(client, server)
	buf := make([]byte, 32<<10)
	for {
		n, err := server.Read(buf)
		if n > 0 {
			p.mu.Lock()
			drop := p.frozen || muted.Load()
			p.mu.Unlock()
			if !drop {
				if _, werr := client.Write(buf[:n]); werr != nil {
					return
				}
			}
		}
		if err != nil {
			return
		}
	}
}

// end closes both sides of a connection, once either ends.
func (p *Proxy) end(a, b net.Conn) {
	a.Close()
	b.Close()
	p.mu.Lock()
	delete(p.conns, a)
	delete(p.conns, b)
	p.mu.Unlock()
	p.wg.Done()
}
