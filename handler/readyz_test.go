package handler_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill/seckill/handler"
	"github.com/seckill/seckill/internal/testenv"
)

// countingReady counts the dependency checks /readyz makes and describes
// a Sentinel setup whose master has an address.
type countingReady struct{ mysql, redis atomic.Int64 }

func (c *countingReady) MySQL(context.Context) error { c.mysql.Add(1); return nil }
func (c *countingReady) Redis(context.Context) error { c.redis.Add(1); return nil }
func (c *countingReady) RedisTopology(context.Context) handler.Topology {
	return handler.Topology{Mode: "sentinel", Master: "10.0.0.7:6379", Failovers: 2}
}

// steadyOrders is an order flow that is never degraded; /readyz asks
// nothing else of it.
type steadyOrders struct{ handler.Orders }

func (steadyOrders) Degraded() bool { return false }

func TestReadyz_OneRoundPerPeriodAndNoAddress(t *testing.T) {
	t.Parallel()
	ready := &countingReady{}
	api, err := handler.New(handler.Config{
		Orders: steadyOrders{}, Ready: ready, AdminToken: adminToken, Log: testenv.Logger(),
		ReadyCache: time.Hour, // the whole test is one period
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api)
	defer srv.Close()
	get := func(path, token string) (int, string) {
		req, err := http.NewRequest(http.MethodGet, srv.URL+path, nil)
		if err != nil {
			t.Error(err)
			return 0, ""
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Error(err)
			return 0, ""
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Error(err)
		}
		return resp.StatusCode, string(body)
	}

	const n = 50
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			status, body := get("/readyz", "")
			if status != http.StatusOK || strings.TrimSpace(body) != `{"status":"ok","mysql":"up","redis":"up"}` {
				t.Errorf(`GET /readyz = %d %s; want 200 {"status":"ok","mysql":"up","redis":"up"} (no topology, no address)`, status, body)
			}
		}()
	}
	close(start)
	wg.Wait()
	if m, r := ready.mysql.Load(), ready.redis.Load(); m != 1 || r != 1 {
		t.Errorf("%d concurrent GET /readyz made %d MySQL pings and %d Redis rounds; want 1 and 1 per ready_cache period", n, m, r)
	}

	// The topology, address included, is for the admin only.
	if status, _ := get("/admin/v1/readyz", ""); status != http.StatusUnauthorized {
		t.Errorf("GET /admin/v1/readyz without a token = %d; want 401", status)
	}
	status, body := get("/admin/v1/readyz", adminToken)
	if status != http.StatusOK || !strings.Contains(body, `"master":"10.0.0.7:6379"`) || !strings.Contains(body, `"status":"ok"`) {
		t.Errorf("GET /admin/v1/readyz = %d %s; want 200 with the status and the Sentinel master", status, body)
	}
	if m := ready.mysql.Load(); m != 1 {
		t.Errorf("the admin view made %d MySQL pings in all; want 1 (the cached round)", m)
	}
}
