package testenv

import (
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/seckill/seckill/lock/locktest"
)

// StartProxy listens on a free loopback port and forwards to target until
// the test ends; it can cut the path (a network partition) and restore it.
func StartProxy(t testing.TB, target string) *locktest.Proxy {
	t.Helper()
	return locktest.StartProxyT(t, target)
}

// MySQLProxy is a Proxy in front of a MySQL or MariaDB server that reads
// its clients' packets: it counts their commands and can go silent at a
// COMMIT (StallAtCommit, SwallowCommitReply).
type MySQLProxy struct {
	*locktest.Proxy

	mu       sync.Mutex
	armed    chan struct{} // closed when the armed COMMIT has been forwarded; nil when not armed
	alone    bool          // the armed COMMIT silences its own connection only
	commands atomic.Int64  // commands clients sent
}

// StartMySQLProxy is StartProxy for a MySQL or MariaDB server.
func StartMySQLProxy(t testing.TB, target string) *MySQLProxy {
	t.Helper()
	p := &MySQLProxy{}
	var err error
	if p.Proxy, err = locktest.NewProxy(target, p.packets); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// ThroughMySQLProxy returns dsn through a StartMySQLProxy in front of its
// server, and the proxy. The caller registers proxy.Cut after opening its
// pools, so that a stalled COMMIT cannot hang their cleanup.
func ThroughMySQLProxy(t testing.TB, dsn string) (string, *MySQLProxy) {
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
func (p *MySQLProxy) StallAtCommit() <-chan struct{} { return p.arm(false) }

// SwallowCommitReply is StallAtCommit for the next COMMIT's connection
// alone: the server commits, its reply never comes back, the connection
// stays open, and every other connection works.
func (p *MySQLProxy) SwallowCommitReply() <-chan struct{} { return p.arm(true) }

func (p *MySQLProxy) arm(alone bool) <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.armed, p.alone = make(chan struct{}), alone
	return p.armed
}

// Commands returns how many commands (round trips) clients have sent
// through p, every connection counted.
func (p *MySQLProxy) Commands() int64 { return p.commands.Load() }

// packets forwards a MySQL client's packets to the server, going silent
// at an armed COMMIT.
func (p *MySQLProxy) packets(dst io.Writer, src io.Reader, mute func()) error {
	for {
		pkt, err := readPacket(src)
		if err != nil {
			return err
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
					mute()
				} else {
					p.Freeze()
				}
			}
			p.mu.Unlock()
		}
		if _, err := dst.Write(pkt); err != nil {
			return err
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
