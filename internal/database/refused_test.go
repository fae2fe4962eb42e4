package database_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/seckill/seckill/internal/database"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/metrics"
	"github.com/seckill/seckill/repository"
	"github.com/seckill/seckill/service"
)

// fullServer stands in front of MariaDB and, once full is set, answers
// every new connection as a server at max_connections does: error 1040
// in place of the handshake.
type fullServer struct {
	ln   net.Listener
	full atomic.Bool
}

func startFullServer(t *testing.T, target string) *fullServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &fullServer{ln: ln}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if s.full.Load() {
				msg := "#08004Too many connections"
				payload := append([]byte{0xff, 0x10, 0x04}, msg...) // 1040, little-endian
				_, _ = c.Write(append([]byte{byte(len(payload)), 0, 0, 0}, payload...))
				c.Close()
				continue
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, c, up)
			mu.Unlock()
			wg.Go(func() { _, _ = io.Copy(up, c); up.Close(); c.Close() })
			wg.Go(func() { _, _ = io.Copy(c, up); up.Close(); c.Close() })
		}
	})
	return s
}

// A server that refuses connections for having too many costs the
// request 503 unavailable (service.ErrUnavailable) and counts in
// seckill_db_connections_refused_total.
func TestOpenMySQL_TooManyConnectionsIsUnavailableAndCounted(t *testing.T) {
	t.Parallel()
	dsn := testenv.Database(t)
	mc, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	srv := startFullServer(t, mc.Addr)
	mc.Addr = srv.ln.Addr().String()
	mx := metrics.New()
	db, err := database.OpenMySQL(mc.FormatDSN(), database.Options{MaxOpenConns: 2, MaxIdleConns: 0, ConnMaxLife: time.Minute, Observer: mx})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { database.Close(db) })
	store := repository.NewMySQL(db)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	now := time.Now().UTC()
	sku, err := store.CreateSKU(ctx, service.SKU{Name: "t", TotalStock: 1, Stock: 1, PerUserLimit: 1, CreatedAt: now, UpdatedAt: now})
	if err != nil {
		t.Fatal(err)
	}

	srv.full.Store(true) // no idle connection is kept: the next read dials
	_, err = store.SKU(ctx, sku.ID)
	if !errors.Is(err, service.ErrUnavailable) || !errors.Is(err, database.ErrTooManyConnections) {
		t.Errorf("SKU with the server full = %v; want ErrUnavailable for ErrTooManyConnections", err)
	}
	if got := scrape(t, mx, "seckill_db_connections_refused_total"); got != "1" {
		t.Errorf("seckill_db_connections_refused_total = %s; want 1", got)
	}

	srv.full.Store(false) // it sells again once the server accepts
	if got, err := store.SKU(ctx, sku.ID); err != nil || got.ID != sku.ID {
		t.Errorf("SKU after the server accepts again = %+v, %v; want sku %d", got, err, sku.ID)
	}
}

// scrape returns the value of an unlabelled series as /metrics shows it.
func scrape(t *testing.T, mx *metrics.Metrics, name string) string {
	t.Helper()
	rec := httptest.NewRecorder()
	mx.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	for line := range strings.Lines(rec.Body.String()) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+" "); ok {
			return v
		}
	}
	t.Fatalf("%s not in /metrics", name)
	return ""
}
