package app_test

import (
	"flag"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/auth"
	"github.com/seckill/seckill/internal/config"
	"github.com/seckill/seckill/internal/testenv"
)

var walkOrders = flag.Int("walk.orders", 2, "orders the walk sends, each by its own buyer (scripts/walk-count.sh runs 0, 1 and 2)")

// The walk of one order (docs/design.md, "The count"): one instance with
// production defaults (a shopper's JWT, the Redis lock) sells the first
// unit of a new SKU to one POST /api/v1/orders, then the second to
// another buyer. scripts/walk-count.sh runs it with coverage counters for
// 0, 1 and 2 orders and counts the functions of this repository whose
// counters each order made grow.
func TestWalkOfOneOrder(t *testing.T) {
	const secret = "walk-secret-0123456789abcdef0123456789"
	cfg := config.Default()
	cfg.HTTP.Addr = "127.0.0.1:0"
	cfg.MySQL.DSN = testenv.Database(t)
	cfg.Redis.Addrs = []string{testenv.RedisAddr()}
	cfg.Admin.Token = token
	cfg.Auth.JWT.Secret = secret
	cfg.Auth.OrderIDKey = "000102030405060708090a0b0c0d0e0f"
	cfg.Lock.Prefix = testenv.Name("test:walk:") + ":"
	url := "http://" + serveConfig(t, cfg)
	skuID := createSKU(t, url)
	for i := range *walkOrders {
		buyer := fmt.Sprintf("walker-%d", i)
		tok, err := auth.Mint([]byte(secret), auth.Claims{Subject: buyer, Audience: cfg.Auth.JWT.Audience, TTL: time.Hour}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		status, order := call(t, http.MethodPost, url+"/api/v1/orders", fmt.Sprintf(`{"sku_id":%d,"quantity":1}`, skuID), "Authorization", "Bearer "+tok)
		if status != http.StatusCreated || order["status"] != "pending" || order["user_id"] != buyer {
			t.Errorf("the walk's order %d = %d %v; want 201, pending, %s's", i, status, order, buyer)
		}
	}
}
