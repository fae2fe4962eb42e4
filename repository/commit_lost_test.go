package repository_test

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/repository"
	"github.com/seckill/seckill/service"
)

// What a commitCutter does to the next COMMIT it sees.
const (
	passCommit      int32 = iota
	dropCommit            // close the connection instead: COMMIT never reaches the server
	loseReply             // forward COMMIT, then close the connection instead of passing the server's reply
	loseReplyAndAll       // as loseReply, then close every connection and refuse new ones
)

// commitCutter is a loopback TCP proxy in front of MariaDB that reads the
// MySQL protocol's packets just enough to find a COMMIT, and fails it on
// demand: the real server, a real connection loss.
//
// A cut reply is dropped on the client's side only: the server's side stays
// open, drained, until the test ends, so the server runs the whole
// multi-statement holding the COMMIT (the statement before it answers
// first) as it would when a reply is lost on the wire.
type commitCutter struct {
	ln      net.Listener
	target  string
	next    atomic.Int32 // what the next COMMIT meets
	mu      sync.Mutex
	clients []net.Conn
	servers []net.Conn
	dark    bool
}

func newCommitCutter(t *testing.T, target string) *commitCutter {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &commitCutter{ln: ln, target: target}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		p.goDark()
		p.mu.Lock()
		for _, c := range p.servers {
			c.Close()
		}
		p.mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() { p.serve(c, &wg) })
		}
	})
	return p
}

func (p *commitCutter) track(client, server net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.dark {
		client.Close()
		server.Close()
		return false
	}
	p.clients = append(p.clients, client)
	p.servers = append(p.servers, server)
	return true
}

// goDark closes every client's connection and refuses new ones; the
// servers' sides stay until the test ends.
func (p *commitCutter) goDark() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.dark = true
	p.ln.Close()
	for _, c := range p.clients {
		c.Close()
	}
}

func (p *commitCutter) serve(client net.Conn, wg *sync.WaitGroup) {
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		client.Close()
		return
	}
	if !p.track(client, server) {
		return
	}
	closeBoth := func() { client.Close(); server.Close() }
	var cut atomic.Int32 // set before COMMIT is forwarded: what its reply meets
	wg.Go(func() {       // server → client
		for {
			pkt, err := readPacket(server)
			if err != nil {
				closeBoth()
				return
			}
			switch cut.Load() {
			case loseReply:
				client.Close()
				_, _ = io.Copy(io.Discard, server) // until the test ends
				return
			case loseReplyAndAll:
				p.goDark()
				_, _ = io.Copy(io.Discard, server)
				return
			}
			if _, err := client.Write(pkt); err != nil {
				closeBoth()
				return
			}
		}
	})
	for { // client → server
		pkt, err := readPacket(client)
		if err != nil {
			closeBoth()
			return
		}
		if testenv.IsCommit(pkt) {
			switch mode := p.next.Swap(passCommit); mode {
			case dropCommit:
				closeBoth()
				return
			case loseReply, loseReplyAndAll:
				cut.Store(mode)
			}
		}
		if _, err := server.Write(pkt); err != nil {
			closeBoth()
			return
		}
	}
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

// A COMMIT whose answer is lost is answered with the truth: the orders
// when it landed, "uncharged" when it did not, ErrOutcomeUnknown when
// the store cannot find out; never "uncharged" for an order that exists.
func TestCommitBatch_LostCommitIsAnsweredTruthfully(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		shared  bool
		known   bool // the batch brings the SKU's row: no reads before the writes
		cut     int32
		landed  bool  // whether the orders are in the database afterwards
		wantErr error // nil: the orders are answered
	}{
		{"reply lost, committed", false, false, loseReply, true, nil},
		{"COMMIT never sent", false, false, dropCommit, false, service.ErrUnavailable},
		{"reply lost, database gone", false, false, loseReplyAndAll, true, service.ErrOutcomeUnknown},
		{"shared round, reply lost, committed", true, false, loseReply, true, nil},
		{"shared round, COMMIT never sent", true, false, dropCommit, false, service.ErrUnavailable},
		{"shared round, reply lost, database gone", true, false, loseReplyAndAll, true, service.ErrOutcomeUnknown},
		{"known row, reply lost, committed", false, true, loseReply, true, nil},
		{"known row, COMMIT never sent", false, true, dropCommit, false, service.ErrUnavailable},
		{"known row, reply lost, database gone", false, true, loseReplyAndAll, true, service.ErrOutcomeUnknown},
		{"shared round of known rows, reply lost, committed", true, true, loseReply, true, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dsn := testenv.Database(t)
			direct := testenv.DB(t, dsn)
			mc, err := mysql.ParseDSN(dsn)
			if err != nil {
				t.Fatal(err)
			}
			p := newCommitCutter(t, mc.Addr)
			mc.Addr = p.ln.Addr().String()
			s := repository.NewMySQL(testenv.DB(t, mc.FormatDSN()))
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			now := time.Now().UTC()
			sku, err := s.CreateSKU(ctx, service.SKU{Name: "c", TotalStock: 5, Stock: 5, PerUserLimit: 1, CreatedAt: now, UpdatedAt: now})
			if err != nil {
				t.Fatal(err)
			}
			b := batch(sku.ID, 0, "a", "b")
			b.Requests[0].IdempotencyKey = "k-" + tt.name
			if tt.known {
				b.Known = &sku
			}

			p.next.Store(tt.cut)
			res, err := commitIn(ctx, s, b, tt.shared)

			// Locking reads: they wait out a COMMIT the server is still running.
			var sold, orders int64
			if err := direct.Raw("SELECT sold FROM skus WHERE id = ? LOCK IN SHARE MODE", sku.ID).Row().Scan(&sold); err != nil {
				t.Fatal(err)
			}
			if err := direct.Raw("SELECT COUNT(*) FROM orders WHERE sku_id = ? LOCK IN SHARE MODE", sku.ID).Row().Scan(&orders); err != nil {
				t.Fatal(err)
			}
			want := int64(0)
			if tt.landed {
				want = 2
			}
			if sold != want || orders != want {
				t.Fatalf("sold %d, %d orders; want %d, %d (the cut did not happen as staged)", sold, orders, want, want)
			}
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("CommitBatch = %v; want %v", err, tt.wantErr)
				}
				if !tt.landed && errors.Is(err, service.ErrOutcomeUnknown) {
					t.Errorf("CommitBatch = %v for a COMMIT that never landed; want a plain uncharged error", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("CommitBatch = %v; want the committed orders", err)
			}
			for i, out := range res.Outcomes {
				if out.Err != nil || !out.Placed.Created {
					t.Fatalf("request %d = %+v; want a new order", i, out)
				}
				var user string
				if err := direct.Raw("SELECT user_id FROM orders WHERE id = ?", out.Placed.Order.ID).Row().Scan(&user); err != nil || user != b.Requests[i].UserID {
					t.Errorf("order %d of request %d: user %q, %v; want %q", out.Placed.Order.ID, i, user, err, b.Requests[i].UserID)
				}
			}
		})
	}
}

// A COMMIT whose reply never comes, the connection left open, ends at the
// batch's deadline and is resolved as a lost reply: the orders when the
// read back finds them, ErrOutcomeUnknown when the database is silent too;
// either way the batch answers within its deadline plus the read back, and
// the books balance.
func TestCommitBatch_CommitWithoutReplyEndsAtTheDeadline(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		shared  bool
		silent  bool // the whole database goes silent, not only the COMMIT's connection
		wantErr error
	}{
		{"reply swallowed, committed", false, false, nil},
		{"shared round, reply swallowed, committed", true, false, nil},
		{"reply swallowed, database silent", false, true, service.ErrOutcomeUnknown},
		{"shared round, reply swallowed, database silent", true, true, service.ErrOutcomeUnknown},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dsn := testenv.Database(t)
			direct := testenv.DB(t, dsn)
			proxied, proxy := testenv.ThroughMySQLProxy(t, dsn)
			s := repository.NewMySQL(testenv.DB(t, proxied))
			t.Cleanup(proxy.Cut) // first: a stuck COMMIT must not hang the cleanup
			now := time.Now().UTC()
			sku, err := s.CreateSKU(context.Background(), service.SKU{Name: "c", TotalStock: 5, Stock: 5, PerUserLimit: 1, CreatedAt: now, UpdatedAt: now})
			if err != nil {
				t.Fatal(err)
			}
			b := batch(sku.ID, 0, "a", "b")

			if tt.silent {
				proxy.StallAtCommit()
			} else {
				proxy.SwallowCommitReply()
			}
			const deadline = 2 * time.Second // the service's is order.tx_timeout
			ctx, cancel := context.WithTimeout(context.Background(), deadline)
			defer cancel()
			type result struct {
				res service.BatchResult
				err error
			}
			done := make(chan result, 1)
			go func() {
				res, err := commitIn(ctx, s, b, tt.shared)
				done <- result{res, err}
			}()
			var r result
			select {
			case r = <-done:
			case <-time.After(3 * deadline):
				t.Fatalf("CommitBatch still waiting %v after its COMMIT got no reply (deadline %v)", 3*deadline, deadline)
			}

			if sold := testenv.CheckInvariants(t, direct, sku.ID); sold != 2 {
				t.Fatalf("sold %d; want 2 (the COMMIT reached the server)", sold)
			}
			if tt.wantErr != nil {
				if !errors.Is(r.err, tt.wantErr) {
					t.Fatalf("CommitBatch = %+v, %v; want %v", r.res, r.err, tt.wantErr)
				}
				return
			}
			if r.err != nil {
				t.Fatalf("CommitBatch = %v; want the committed orders", r.err)
			}
			for i, out := range r.res.Outcomes {
				if out.Err != nil || !out.Placed.Created {
					t.Errorf("request %d = %+v; want a new order", i, out)
				}
			}
		})
	}
}
