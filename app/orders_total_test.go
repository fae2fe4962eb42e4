package app_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/seckill/seckill/handler"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/service"
)

// TestOrdersTotalCountsEveryAnswer sends order requests answered at every
// layer (the handler's own 400/413/415, the order flow's 400/404/409/201)
// and requires seckill_orders_total to count each once, under its result;
// every result's series exists, at 0, before the first order.
func TestOrdersTotalCountsEveryAnswer(t *testing.T) {
	t.Parallel()
	dsn := testenv.Database(t)
	url := instance(t, dsn, testenv.RedisAddr(), testenv.Name("test:ordcount:")+":")

	results := append(service.OrderResults(), handler.RefusedResults()...)
	before := scrape(t, url)
	for _, r := range results {
		if got := before.matching("seckill_orders_total", "result", r); len(got) != 1 || got[0].GetCounter().GetValue() != 0 {
			t.Errorf(`seckill_orders_total{result=%q} before any order = %v; want one series at 0`, r, got)
		}
	}

	sku := newSKU(t, url, 3, 2)
	body := func(user string, qty int) string {
		return fmt.Sprintf(`{"sku_id":%d,"user_id":%q,"quantity":%d}`, sku, user, qty)
	}
	tests := []struct {
		name    string
		body    string
		headers []string
		status  int
		result  string
	}{
		{"created", body("a", 2), nil, 201, "created"},
		{"insufficient stock", body("b", 2), nil, 409, "insufficient_stock"},
		{"over the limit", body("a", 1), nil, 409, "limit_exceeded"},
		{"broken JSON", `{"sku_id":`, nil, 400, "invalid"},
		{"null body", `null`, nil, 400, "invalid"},
		{"missing field", fmt.Sprintf(`{"sku_id":%d}`, sku), nil, 400, "invalid"},
		{"bad key", body("c", 1), []string{"Idempotency-Key", ""}, 400, "invalid"},
		{"quantity zero", body("c", 0), nil, 400, "invalid"},
		{"blank user", body("   ", 1), nil, 400, "invalid"},
		{"not JSON", body("c", 1), []string{"Content-Type", "text/plain"}, 415, "unsupported_media_type"},
		{"too large", `{"user_id":"` + strings.Repeat("x", 5000) + `"}`, nil, 413, "too_large"},
		{"unknown sku", `{"sku_id":987654321,"user_id":"c","quantity":1}`, nil, 404, "sku_not_found"},
	}
	want := map[string]float64{}
	for _, tc := range tests {
		status, got := call(t, http.MethodPost, url+"/api/v1/orders", tc.body, tc.headers...)
		if status != tc.status {
			t.Errorf("%s: POST /api/v1/orders = %d %v; want %d", tc.name, status, got, tc.status)
		}
		want[tc.result]++
	}

	after := scrape(t, url)
	for _, r := range results {
		if got := after.value("seckill_orders_total", "result", r); got != want[r] {
			t.Errorf(`seckill_orders_total{result=%q} = %v; want %v`, r, got, want[r])
		}
	}
	if got := after.value("seckill_orders_total"); got != float64(len(tests)) {
		t.Errorf("seckill_orders_total (all results) = %v; want %d, one per answered request", got, len(tests))
	}
}
