package handler_test

import (
	"context"
	"errors"
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

// replicatedReady is a database whose replication can or cannot confirm
// commits (mysql.min_replicas).
type replicatedReady struct {
	countingReady
	asked bool
	err   error
}

func (r *replicatedReady) MySQLReplication() any        { return map[string]any{"confirming": 0} }
func (r *replicatedReady) ReplicasReady() (bool, error) { return r.asked, r.err }

// TestReadyz_ShortOfReplicas (issue 46 f): while fewer replicas keep up
// than mysql.min_replicas, every write would be answered outcome_unknown:
// /readyz says so with 503 and mysql_replicas "short", which a balancer
// acts on; the admin view says the same with 200. Without min_replicas
// the field is absent.
func TestReadyz_ShortOfReplicas(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		ready  *replicatedReady
		status int
		body   string
	}{
		{"not asked", &replicatedReady{}, http.StatusOK, `{"status":"ok","mysql":"up","redis":"up"}`},
		{"keeping up", &replicatedReady{asked: true}, http.StatusOK, `{"status":"ok","mysql":"up","redis":"up","mysql_replicas":"ok"}`},
		{"short", &replicatedReady{asked: true, err: errors.New("0 of 1")}, http.StatusServiceUnavailable,
			`{"status":"unavailable","mysql":"up","redis":"up","mysql_replicas":"short"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			api, err := handler.New(handler.Config{Orders: steadyOrders{}, Ready: tc.ready, AdminToken: adminToken, Log: testenv.Logger(), ReadyCache: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			rec := httptest.NewRecorder()
			api.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
			if rec.Code != tc.status || strings.TrimSpace(rec.Body.String()) != tc.body {
				t.Errorf("GET /readyz = %d %s; want %d %s", rec.Code, rec.Body.String(), tc.status, tc.body)
			}
			req := httptest.NewRequest(http.MethodGet, "/admin/v1/readyz", nil)
			req.Header.Set("Authorization", "Bearer "+adminToken)
			rec = httptest.NewRecorder()
			api.ServeHTTP(rec, req)
			if rec.Code != http.StatusOK || tc.ready.asked && !strings.Contains(rec.Body.String(), `"mysql_replicas":"`) {
				t.Errorf("GET /admin/v1/readyz = %d %s; want 200 naming mysql_replicas", rec.Code, rec.Body.String())
			}
		})
	}
}
