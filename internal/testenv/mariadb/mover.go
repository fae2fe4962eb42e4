package mariadb

import (
	"context"
	"io"
	"net"
	"sync"
)

// Mover is one TCP address in front of a server, moved to another the
// way an operator moves a virtual IP or a DNS name after a failover.
type Mover struct {
	Addr string

	ln     net.Listener
	mu     sync.Mutex
	target string
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup
}

// NewMover listens on a free loopback port and forwards to target.
func NewMover(target string) (*Mover, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	m := &Mover{Addr: ln.Addr().String(), ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	m.wg.Add(1)
	go m.accept()
	return m, nil
}

// Move sends new connections to target. With cut, the connections made
// so far are closed too (the old server's machine is gone); without,
// they stay with the old server (it is alive, demoted).
func (m *Mover) Move(target string, cut bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.target = target
	if cut {
		for c := range m.conns {
			c.Close()
		}
		clear(m.conns)
	}
}

// Close stops listening and closes every connection.
func (m *Mover) Close() {
	m.ln.Close()
	m.mu.Lock()
	for c := range m.conns {
		c.Close()
	}
	clear(m.conns)
	m.mu.Unlock()
	m.wg.Wait()
}

func (m *Mover) accept() {
	defer m.wg.Done()
	for {
		in, err := m.ln.Accept()
		if err != nil {
			return
		}
		m.mu.Lock()
		target := m.target
		m.mu.Unlock()
		out, err := net.Dial("tcp", target)
		if err != nil {
			in.Close()
			continue
		}
		m.mu.Lock()
		m.conns[in], m.conns[out] = struct{}{}, struct{}{}
		m.mu.Unlock()
		m.wg.Add(2)
		go m.pipe(in, out)
		go m.pipe(out, in)
	}
}

// pipe copies src to dst; either side ending ends both.
func (m *Mover) pipe(dst, src net.Conn) {
	defer m.wg.Done()
	_, _ = io.Copy(dst, src)
	dst.Close()
	src.Close()
	m.mu.Lock()
	delete(m.conns, dst)
	delete(m.conns, src)
	m.mu.Unlock()
}

// TB is what SetBehindMover needs of a test.
type TB interface {
	Helper()
	TempDir() string
	Cleanup(func())
	Fatal(args ...any)
}

// SetBehindMover starts a primary and n replicas of the test's own
// (StartSet) and a Mover at the primary: the one address clients reach
// the primary at, moved on a failover. Both end with the test.
func SetBehindMover(t TB, n int, semiSync bool) (*Set, *Mover) {
	t.Helper()
	set, err := StartSet(context.Background(), t.TempDir(), n, semiSync)
	t.Cleanup(set.Stop)
	if err != nil {
		t.Fatal(err)
	}
	mover, err := NewMover(set.Primary.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(mover.Close)
	return set, mover
}
