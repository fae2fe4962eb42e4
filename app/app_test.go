package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill/seckill/app"

	"github.com/seckill/seckill/internal/config"
	"github.com/seckill/seckill/internal/testenv"
)

const token = "test-admin-token-0123456789"

// instance starts one service process-equivalent (its own pools, lock
// client, queues and HTTP server) and returns its base URL.
func instance(t *testing.T, dsn, redisAddr, prefix string) string {
	t.Helper()
	return instanceOn(t, dsn, []string{redisAddr}, prefix)
}

// instanceOn is instance with several Redis masters: Redlock.
func instanceOn(t *testing.T, dsn string, redisAddrs []string, prefix string) string {
	t.Helper()
	return "http://" + serveConfig(t, instanceConfig(dsn, redisAddrs, prefix))
}

// instanceConfig is the settings of an instance: production's, on the
// test's database, Redis and key prefix, with auth.shopper none.
func instanceConfig(dsn string, redisAddrs []string, prefix string) config.Config {
	cfg := config.Default()
	cfg.HTTP.Addr = "127.0.0.1:0"
	cfg.MySQL.DSN = dsn
	cfg.MySQL.MaxOpenConns = 16
	cfg.MySQL.MaxIdleConns = 16
	cfg.Redis.Addrs = redisAddrs
	if len(redisAddrs) > 1 {
		cfg.Redis.Mode = config.RedisRedlock
	}
	cfg.Admin.Token = token
	noShopperAuth(&cfg)
	cfg.Lock.Prefix = prefix
	return cfg
}

// noShopperAuth chooses auth.shopper none, as the tests of the order path
// do: they name their buyers in the body (internal/auth and handler test
// the tokens).
func noShopperAuth(cfg *config.Config) {
	cfg.Auth.Shopper = config.ShopperNone
	cfg.Auth.OrderIDKey = "000102030405060708090a0b0c0d0e0f"
}

var client = &http.Client{
	Timeout:   60 * time.Second,
	Transport: &http.Transport{MaxIdleConns: 4000, MaxIdleConnsPerHost: 1000},
}

func call(t *testing.T, method, url, body string, headers ...string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := doReplayable(t, req)
	if err != nil {
		t.Errorf("%s %s: %v", method, url, err)
		return 0, nil
	}
	defer resp.Body.Close()
	var m map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		t.Errorf("%s %s: status %d, body not JSON: %v", method, url, resp.StatusCode, err)
	}
	return resp.StatusCode, m
}

// sale runs 2,000 distinct buyers plus 10% who try twice (with a fresh
// Idempotency-Key each time) against the instances, round robin, and
// returns the statuses. midway runs once, after the 100th sale.
func sale(t *testing.T, urls []string, skuID int64, midway func()) map[int]int {
	t.Helper()
	var (
		mu       sync.Mutex
		statuses = map[int]int{}
		created  atomic.Int64
		once     sync.Once
		wg       sync.WaitGroup
		start    = make(chan struct{})
		n        atomic.Int64
	)
	buy := func(user string, attempt int) {
		defer wg.Done()
		<-start
		url := urls[int(n.Add(1))%len(urls)]
		body := fmt.Sprintf(`{"sku_id":%d,"user_id":%q,"quantity":1}`, skuID, user)
		status, _ := call(t, http.MethodPost, url+"/api/v1/orders", body, "Idempotency-Key", fmt.Sprintf("%s-%d", user, attempt))
		mu.Lock()
		statuses[status]++
		mu.Unlock()
		if status == http.StatusCreated && created.Add(1) == 100 && midway != nil {
			once.Do(midway)
		}
	}
	for i := range 2000 {
		user := fmt.Sprintf("buyer-%d", i)
		wg.Add(1)
		go buy(user, 1)
		if i%10 == 0 {
			wg.Add(1)
			go buy(user, 2)
		}
	}
	close(start)
	wg.Wait()
	return statuses
}

// verify checks the invariants through the admin API and returns sold.
func verify(t *testing.T, url string, skuID int64) {
	t.Helper()
	status, sku := call(t, http.MethodGet, fmt.Sprintf("%s/admin/v1/skus/%d", url, skuID), "", "Authorization", "Bearer "+token)
	if status != http.StatusOK {
		t.Fatalf("admin get sku: %d", status)
	}
	if sku["sold"] != 500.0 || sku["stock"] != 0.0 {
		t.Errorf("sku after the sale: sold %v stock %v; want 500, 0", sku["sold"], sku["stock"])
	}
	perUser := map[string]int{}
	orders := 0
	after := ""
	for range 100 {
		q := "?limit=1000"
		if after != "" {
			q += "&after=" + after
		}
		_, page := call(t, http.MethodGet, fmt.Sprintf("%s/admin/v1/skus/%d/orders%s", url, skuID, q), "", "Authorization", "Bearer "+token)
		list, _ := page["orders"].([]any)
		for _, o := range list {
			m := o.(map[string]any)
			perUser[m["user_id"].(string)] += int(m["quantity"].(float64))
			orders++
		}
		next, ok := page["next_after"].(string)
		if !ok {
			break
		}
		after = next
	}
	if orders != 500 {
		t.Errorf("orders = %d; want 500", orders)
	}
	for u, q := range perUser {
		if q > 1 {
			t.Errorf("user %s holds %d units; the limit is 1", u, q)
		}
	}
}

func createSKU(t *testing.T, url string) int64 {
	t.Helper()
	status, sku := call(t, http.MethodPost, url+"/admin/v1/skus", `{"name":"flash","stock":500,"per_user_limit":1}`, "Authorization", "Bearer "+token)
	if status != http.StatusCreated {
		t.Fatalf("create sku: %d %v", status, sku)
	}
	return int64(sku["id"].(float64))
}

func checkStatuses(t *testing.T, statuses map[int]int, allowed ...int) {
	t.Helper()
	total := 0
	for s, n := range statuses {
		total += n
		ok := false
		for _, a := range allowed {
			ok = ok || s == a
		}
		if !ok {
			t.Errorf("%d answers with status %d, outside the contract %v", n, s, allowed)
		}
	}
	if statuses[http.StatusServiceUnavailable] > 0 {
		t.Logf("%d answers were 503 (deadline passed on a loaded machine)", statuses[http.StatusServiceUnavailable])
	}
	if total != 2200 {
		t.Errorf("%d answers; want 2200", total)
	}
	if statuses[http.StatusCreated] != 500 {
		t.Errorf("%d answered 201; want 500 (%v)", statuses[http.StatusCreated], statuses)
	}
}

func TestThreeInstancesSellExactlyTheStock(t *testing.T) {
	dsn := testenv.Database(t)
	prefix := testenv.Name("test:app:") + ":"
	urls := []string{
		instance(t, dsn, testenv.RedisAddr(), prefix),
		instance(t, dsn, testenv.RedisAddr(), prefix),
		instance(t, dsn, testenv.RedisAddr(), prefix),
	}
	skuID := createSKU(t, urls[0])
	statuses := sale(t, urls, skuID, nil)
	// 503 is in the contract (a buyer's deadline passing on a loaded box),
	// uncharged; whatever happens, exactly the stock is sold.
	checkStatuses(t, statuses, http.StatusCreated, http.StatusConflict, http.StatusServiceUnavailable)
	noRequestDropped(t, urls)
	verify(t, urls[1], skuID)
}

func TestThreeInstancesSellExactlyTheStockWhenRedisStops(t *testing.T) {
	srv := testenv.StartRedis(t)
	dsn := testenv.Database(t)
	prefix := testenv.Name("test:app:") + ":"
	urls := []string{
		instance(t, dsn, srv.Addr, prefix),
		instance(t, dsn, srv.Addr, prefix),
		instance(t, dsn, srv.Addr, prefix),
	}
	skuID := createSKU(t, urls[0])
	statuses := sale(t, urls, skuID, srv.Stop)
	checkStatuses(t, statuses, http.StatusCreated, http.StatusConflict, http.StatusServiceUnavailable)
	noRequestDropped(t, urls)
	verify(t, urls[2], skuID)

	_, ready := call(t, http.MethodGet, urls[0]+"/readyz", "")
	if ready["status"] != "degraded" || ready["redis"] != "down" {
		t.Errorf("/readyz with Redis stopped = %v; want degraded, redis down", ready)
	}
}

func TestDrainDelay_ReadyzSaysDrainingWhileOrdersStillSell(t *testing.T) {
	dsn := testenv.Database(t)
	cfg := config.Default()
	cfg.HTTP.Addr = "127.0.0.1:0"
	cfg.HTTP.DrainDelay = 2 * time.Second
	cfg.MySQL.DSN = dsn
	cfg.Redis.Addrs = []string{testenv.RedisAddr()}
	cfg.Admin.Token = token
	noShopperAuth(&cfg)
	cfg.Lock.Prefix = testenv.Name("test:drain:") + ":"
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- app.Serve(ctx, cfg, testenv.Logger(), io.Discard, func(a string) { addr <- a })
	}()
	url := "http://" + <-addr
	skuID := createSKU(t, url)

	cancel() // what SIGTERM does in main
	deadline := time.Now().Add(10 * time.Second)
	for {
		status, body := call(t, http.MethodGet, url+"/readyz", "")
		if status == http.StatusServiceUnavailable && body["status"] == "draining" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz never said draining after the shutdown signal (last %d %v)", status, body)
		}
		time.Sleep(10 * time.Millisecond) // polling observable state, bounded above
	}
	// Still draining: the listener is open and orders still sell.
	status, order := call(t, http.MethodPost, url+"/api/v1/orders", fmt.Sprintf(`{"sku_id":%d,"user_id":"late","quantity":1}`, skuID))
	if status != http.StatusCreated {
		t.Errorf("order while draining = %d %v; want 201", status, order)
	}
	if err := <-done; err != nil {
		t.Errorf("Serve after draining = %v; want a clean stop", err)
	}
}

func TestThreeInstancesOnRedlockSellExactlyTheStockWhenAMajorityDies(t *testing.T) {
	nodes := []*testenv.RedisServer{testenv.StartRedis(t), testenv.StartRedis(t), testenv.StartRedis(t)}
	addrs := []string{nodes[0].Addr, nodes[1].Addr, nodes[2].Addr}
	dsn := testenv.Database(t)
	prefix := testenv.Name("test:redlock:") + ":"
	urls := []string{
		instanceOn(t, dsn, addrs, prefix),
		instanceOn(t, dsn, addrs, prefix),
		instanceOn(t, dsn, addrs, prefix),
	}
	skuID := createSKU(t, urls[0])
	// Two of three masters die mid-sale: no quorum, so the instances sell
	// on the database's guard alone.
	statuses := sale(t, urls, skuID, func() { nodes[0].Stop(); nodes[1].Stop() })
	checkStatuses(t, statuses, http.StatusCreated, http.StatusConflict, http.StatusServiceUnavailable)
	noRequestDropped(t, urls)
	verify(t, urls[1], skuID)
	_, ready := call(t, http.MethodGet, urls[2]+"/readyz", "")
	if ready["status"] != "degraded" {
		t.Errorf("/readyz with 2 of 3 Redlock masters down = %v; want degraded", ready)
	}
}
