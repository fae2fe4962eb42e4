package app_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/config"
	"github.com/seckill/seckill/internal/testenv"
)

// TestRedisTLS_TwoInstancesSellThroughAnACLUser: two instances whose Redis
// is a real redis-server reached over TLS only (a throwaway CA), logged in
// as an ACL user with a password (the default user is off), sell exactly
// the stock of 100 to 300 buyers, and they did so under the lock: the
// SKU's fence counter is on that server, and /readyz says Redis is up.
func TestRedisTLS_TwoInstancesSellThroughAnACLUser(t *testing.T) {
	srv := testenv.StartRedisTLS(t)
	dsn := testenv.Database(t)
	prefix := testenv.Name("test:tls:") + ":"
	tlsInstance := func() string {
		cfg := config.Default()
		cfg.HTTP.Addr = "127.0.0.1:0"
		cfg.MySQL.DSN = dsn
		cfg.MySQL.MaxOpenConns, cfg.MySQL.MaxIdleConns = 16, 16
		cfg.Redis.Addrs = []string{srv.TLSAddr}
		cfg.Redis.Username, cfg.Redis.Password = srv.User, srv.Password
		cfg.Redis.TLS = config.RedisTLS{Enabled: true, CAFile: srv.Files.CA}
		cfg.Admin.Token = token
		noShopperAuth(&cfg)
		cfg.Lock.Prefix = prefix
		return "http://" + serveConfig(t, cfg)
	}
	urls := []string{tlsInstance(), tlsInstance()}
	for _, u := range urls {
		if status, ready := call(t, http.MethodGet, u+"/readyz", ""); status != http.StatusOK || ready["redis"] != "up" {
			t.Fatalf("/readyz over TLS = %d %v; want 200, redis up", status, ready)
		}
	}
	// A small sale, 16 buyers at a time: the point is the TLS path, not
	// the load (TestThreeInstancesSellExactlyTheStock is the load).
	status, sku := call(t, http.MethodPost, urls[0]+"/admin/v1/skus", `{"name":"tls","stock":100,"per_user_limit":1}`, "Authorization", "Bearer "+token)
	if status != http.StatusCreated {
		t.Fatalf("create sku: %d %v", status, sku)
	}
	skuID := int64(sku["id"].(float64))
	created, soldOut := tlsSale(t, urls, skuID, 300)
	if created != 100 || created+soldOut != 300 {
		t.Errorf("300 buyers of 100 units: %d created, %d sold out; want 100 and 200", created, soldOut)
	}
	status, after := call(t, http.MethodGet, fmt.Sprintf("%s/admin/v1/skus/%d", urls[1], skuID), "", "Authorization", "Bearer "+token)
	if status != http.StatusOK || after["sold"] != 100.0 || after["stock"] != 0.0 {
		t.Errorf("SKU after the sale: %d %v; want sold 100, stock 0", status, after)
	}

	// A client of the test's own, as the service's user over TLS: the lock
	// wrote the SKU's fence counter there (the fallback path writes none).
	pem, err := os.ReadFile(srv.Files.CA)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	c := redis.NewClient(&redis.Options{Addr: srv.TLSAddr, Username: srv.User, Password: srv.Password,
		TLSConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}})
	defer c.Close()
	fence := fmt.Sprintf("%s{sku:%d}:fence", prefix, skuID)
	if n, err := c.Exists(context.Background(), fence).Result(); err != nil || n != 1 {
		t.Errorf("EXISTS %s over TLS = %d, %v; want 1: the sale did not go through the lock", fence, n, err)
	}
}

// tlsSale sends one order for each of n buyers, 16 at a time, round robin
// over urls, and counts the answers. A 503 or a dropped connection is
// retried with the same Idempotency-Key (at most 5 times), so every buyer
// ends with 201 or 409 sold_out; anything else fails the test.
func tlsSale(t *testing.T, urls []string, skuID int64, n int) (created, soldOut int) {
	t.Helper()
	var mu sync.Mutex
	buyers := make(chan int)
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range buyers {
				body := fmt.Sprintf(`{"sku_id":%d,"user_id":"tls-%d","quantity":1}`, skuID, i)
				var status int
				var answer map[string]any
				for attempt := range 5 {
					status, answer = post(urls[(i+attempt)%len(urls)]+"/api/v1/orders", body, fmt.Sprintf("tls-key-%d", i))
					if status != 0 && status != http.StatusServiceUnavailable {
						break
					}
				}
				mu.Lock()
				switch {
				case status == http.StatusCreated || status == http.StatusOK:
					created++
				case status == http.StatusConflict && errorCode(answer) == "sold_out":
					soldOut++
				default:
					t.Errorf("buyer %d: %d %v; want 201 or 409 sold_out", i, status, answer)
				}
				mu.Unlock()
			}
		}()
	}
	for i := range n {
		buyers <- i
	}
	close(buyers)
	wg.Wait()
	return created, soldOut
}

// post sends an order; status 0 is a dropped connection.
func post(url, body, key string) (int, map[string]any) {
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return 0, nil
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil
	}
	defer resp.Body.Close()
	var m map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&m) // a status without a JSON body keeps m nil
	return resp.StatusCode, m
}

func errorCode(m map[string]any) string {
	e, _ := m["error"].(map[string]any)
	code, _ := e["code"].(string)
	return code
}
