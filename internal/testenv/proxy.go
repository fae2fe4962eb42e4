package testenv

import (
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/go-sql-driver/mysql"
)

// Proxy forwards TCP connections from a loopback port to a target, and can
// cut the path (a network partition) and restore it. One started by
// StartMySQLProxy can also go silent at a COMMIT (StallAtCommit).
type Proxy struct {
	Addr string

	target string
	ln     net.Listener
	mysql  bool // client bytes are read as MySQL packets; set once

	mu     sync.Mutex
	cut    bool
	conns  map[net.Conn]struct{}
	armed  chan struct{} // closed when the armed COMMIT has been forwarded; nil when not armed
	alone  bool          // the armed COMMIT silences its own connection only
	silent bool          // replies are swallowed

	commands atomic.Int64 // commands clients sent (MySQL only)
	wg       sync.WaitGroup
}

// StartProxy listens on a free loopback port and forwards to target until
// the test ends.
func StartProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	return startProxy(t, target, false)
}

func startProxy(t testing.TB, target string, mysql bool) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{Addr: ln.Addr().String(), target: target, ln: ln, mysql: mysql, conns: make(map[net.Conn]struct{})}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(func() {
		ln.Close()
		p.Cut()
		p.wg.Wait()
	})
	return p
}

// StartMySQLProxy is StartProxy for a MySQL or MariaDB server.
func StartMySQLProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	return startProxy(t, target, true)
}

// ThroughMySQLProxy returns dsn through a StartMySQLProxy in front of its
// server, and the proxy. The caller registers proxy.Cut after opening its
// pools, so that a stalled COMMIT cannot hang their cleanup.
func ThroughMySQLProxy(t testing.TB, dsn string) (string, *Proxy) {
	t.Helper()
	mc, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	proxy := StartMySQLProxy(t, mc.Addr)
	mc.Addr = proxy.Addr
	return mc.FormatDSN(), proxy
}

// StallAtCommit makes the next COMMIT a client sends the last request the
// server answers: the COMMIT reaches the server, and from then on every
// reply, on every connection old or new, is swallowed and no connection
// is closed — a primary gone silent, or an fsync that never returns. The
// channel is closed once that COMMIT has been forwarded.
func (p *Proxy) StallAtCommit() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.mysql {
		panic("testenv: StallAtCommit needs a proxy from StartMySQLProxy")
	}
	p.armed, p.alone = make(chan struct{}), false
	return p.armed
}

// SwallowCommitReply is StallAtCommit for the next COMMIT's connection
// alone: the server commits, its reply never comes back, the connection
// stays open, and every other connection works.
func (p *Proxy) SwallowCommitReply() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.mysql {
		panic("testenv: SwallowCommitReply needs a proxy from StartMySQLProxy")
	}
	p.armed, p.alone = make(chan struct{}), true
	return p.armed
}

// Cut closes every forwarded connection and refuses new ones until Restore.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
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

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		cut := p.cut
		p.mu.Unlock()
		if cut {
			in.Close()
			continue
		}
		out, err := net.Dial("tcp", p.target)
		if err != nil {
			in.Close()
			continue
		}
		p.mu.Lock()
		if p.cut {
			p.mu.Unlock()
			in.Close()
			out.Close()
			continue
		}
		p.conns[in], p.conns[out] = struct{}{}, struct{}{}
		p.mu.Unlock()
		p.wg.Add(2)
		if p.mysql {
			mute := new(atomic.Bool) // this connection's replies are swallowed
			go p.packets(out, in, mute)
			go p.replies(in, out, mute)
			continue
		}
		go p.pipe(in, out)
		go p.pipe(out, in)
	}
}

// packets forwards a MySQL client's packets to the server, going silent
// at an armed COMMIT.
func (p *Proxy) packets(dst, src net.Conn, mute *atomic.Bool) {
	defer p.end(dst, src)
	for {
		pkt, err := readPacket(src)
		if err != nil {
			return
		}
		if pkt[3] == 0 { // sequence 0: a command starts
			p.commands.Add(1)
		}
		var forwarded chan struct{}
		if IsCommit(pkt) {
			p.mu.Lock()
			if p.armed != nil {
				forwarded, p.armed = p.armed, nil
				// Before the COMMIT leaves: its reply is swallowed.
				if p.alone {
					mute.Store(true)
				} else {
					p.silent = true
				}
			}
			p.mu.Unlock()
		}
		if _, err := dst.Write(pkt); err != nil {
			return
		}
		if forwarded != nil {
			close(forwarded)
		}
	}
}

// IsCommit reports whether pkt, a MySQL client packet with its header,
// is a query that ends with COMMIT: alone, or as the last statement of a
// multi-statement (the store resets its lock wait with it).
func IsCommit(pkt []byte) bool {
	q := pkt[4:]
	return len(q) > 0 && q[0] == 0x03 && (string(q[1:]) == "COMMIT" || strings.HasSuffix(string(q[1:]), "; COMMIT"))
}

// Commands returns how many commands (round trips) clients have sent
// through p, every connection counted; a proxy from StartMySQLProxy only.
func (p *Proxy) Commands() int64 { return p.commands.Load() }

// replies forwards a MySQL server's bytes to its client unless the proxy
// has gone silent, when they are read and dropped.
func (p *Proxy) replies(dst, src net.Conn, mute *atomic.Bool) {
	defer p.end(dst, src)
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			silent := p.silent || mute.Load()
			p.mu.Unlock()
			if !silent {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *Proxy) end(dst, src net.Conn) {
	p.wg.Done()
	dst.Close()
	src.Close()
	p.mu.Lock()
	delete(p.conns, dst)
	delete(p.conns, src)
	p.mu.Unlock()
}

// readPacket reads one MySQL packet: a 3-byte little-endian length, a
// sequence byte, the payload.
func readPacket(r io.Reader) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := int(hdr[0]) | int(hdr[1])<<8 | int(hdr[2])<<16
	pkt := make([]byte, 4+n)
	copy(pkt, hdr[:])
	_, err := io.ReadFull(r, pkt[4:])
	return pkt, err
}

func (p *Proxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	_, _ = io.Copy(dst, src)
	dst.Close()
	src.Close()
	p.mu.Lock()
	delete(p.conns, dst)
	delete(p.conns, src)
	p.mu.Unlock()
}
