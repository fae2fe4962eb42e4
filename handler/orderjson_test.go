package handler

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/orderid"
	"github.com/seckill/seckill/service"
)

func TestAppendOrderMatchesEncodingJSON(t *testing.T) {
	users := []string{
		"u-123", "", `quote " and \ backslash`, "tab\tnew\nline\rcr", "\x00\x01\x1f\x7f",
		"<script>&amp;</script>", "ünïcödé 秒杀 🛒", "\u2028\u2029", "bad \xff\xfe utf8", "\xe2\x82",
	}
	times := []time.Time{
		time.Date(2026, 11, 11, 0, 0, 0, 0, time.UTC),
		time.Date(2026, 11, 11, 0, 0, 0, 123456000, time.UTC),
		time.Date(2026, 11, 11, 8, 0, 0, 1, time.FixedZone("CST", 8*3600)),
	}
	ids, err := orderid.New([]byte("0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range users {
		for _, at := range times {
			due := at.Add(15 * time.Minute)
			for _, o := range []service.Order{
				{ID: 9007199254740993, SKUID: 7, UserID: u, Quantity: 1 << 30, CreatedAt: at, Status: service.OrderPaid},
				{ID: 1, SKUID: 7, UserID: u, Quantity: 1, CreatedAt: at, Status: service.OrderPending, ExpiresAt: &due},
			} {
				want, err := json.Marshal(orderJSON(ids, o))
				if err != nil {
					t.Fatal(err)
				}
				if got := appendOrder(nil, ids, o); string(got) != string(want) {
					t.Errorf("appendOrder(%q, %v)\n got %s\nwant %s", u, at, got, want)
				}
			}
		}
	}
}

func FuzzAppendString(f *testing.F) {
	f.Add("u-1")
	f.Add("<\u2028\xff")
	f.Fuzz(func(t *testing.T, s string) {
		want, _ := json.Marshal(s)
		if got := appendString(nil, s); string(got) != string(want) {
			t.Errorf("appendString(%q) = %s; want %s", s, got, want)
		}
	})
}
