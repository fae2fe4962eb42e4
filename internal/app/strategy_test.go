package app_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/seckill/seckill/internal/config"
	"github.com/seckill/seckill/internal/testenv"
)

// TestServe_ComparisonDesignsAreWired starts the service with each
// order.strategy that make bench measures and sells through HTTP: every
// design answers from the contract and sells exactly the stock.
func TestServe_ComparisonDesignsAreWired(t *testing.T) {
	t.Parallel()
	for _, strategy := range config.Strategies {
		t.Run(strategy, func(t *testing.T) {
			t.Parallel()
			cfg := config.Default()
			cfg.HTTP.Addr = "127.0.0.1:0"
			cfg.MySQL.DSN = testenv.Database(t)
			cfg.MySQL.MaxOpenConns, cfg.MySQL.MaxIdleConns = 8, 8
			cfg.Redis.Addrs = []string{testenv.RedisAddr()}
			cfg.Admin.Token = token
			noShopperAuth(&cfg)
			cfg.Lock.Prefix = testenv.Name("test:app:") + ":"
			cfg.Order.Strategy = strategy
			url := "http://" + serveConfig(t, cfg)
			status, sku := call(t, http.MethodPost, url+"/admin/v1/skus", `{"name":"s","stock":3,"per_user_limit":1}`, "Authorization", "Bearer "+token)
			if status != http.StatusCreated {
				t.Fatalf("create sku: %d %v", status, sku)
			}
			id := int64(sku["id"].(float64))
			statuses := map[int]int{}
			for i := range 5 {
				status, _ := call(t, http.MethodPost, url+"/api/v1/orders", fmt.Sprintf(`{"sku_id":%d,"user_id":"u-%d","quantity":1}`, id, i))
				statuses[status]++
			}
			if statuses[http.StatusCreated] != 3 || statuses[http.StatusConflict] != 2 {
				t.Errorf("%s: statuses %v; want 3 × 201 and 2 × 409 sold_out", strategy, statuses)
			}
			if status, body := call(t, http.MethodPost, url+"/api/v1/orders", `{"sku_id":987654321,"user_id":"u","quantity":1}`); status != http.StatusNotFound {
				t.Errorf("%s: order for an unknown sku = %d %v; want 404", strategy, status, body)
			}
			_, after := call(t, http.MethodGet, fmt.Sprintf("%s/admin/v1/skus/%d", url, id), "", "Authorization", "Bearer "+token)
			if after["sold"] != 3.0 || after["stock"] != 0.0 {
				t.Errorf("%s: sold %v stock %v; want 3, 0", strategy, after["sold"], after["stock"])
			}
		})
	}
}
