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

// FuzzAppendOrder holds the hand-written encoder to encoding/json, the
// library it stands in for: for any order, the same bytes.
func FuzzAppendOrder(f *testing.F) {
	ids, err := orderid.New([]byte("0123456789abcdef"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(int64(1), int64(7), "u-1", int64(1), int64(1793491200123456000), 0, "pending", true, int64(900e9))
	f.Add(int64(9007199254740993), int64(-1), "<\u2028\xff\"\\", int64(1<<30), int64(-1), 8*3600+1, "paid", false, int64(0))
	f.Fuzz(func(t *testing.T, id, sku int64, user string, quantity, created int64, offset int, status string, pending bool, due int64) {
		zone := time.FixedZone("z", offset%(24*3600))
		o := service.Order{ID: id, SKUID: sku, UserID: user, Quantity: quantity, CreatedAt: time.Unix(0, created).In(zone),
			Status: service.OrderStatus(status)}
		if pending {
			e := time.Unix(0, due).In(zone)
			o.ExpiresAt = &e
		}
		if due%2 != 0 { // given its units off a waitlist
			a := time.Unix(0, due/2).In(zone)
			o.AllocatedAt = &a
		}
		want, err := json.Marshal(orderJSON(ids, o))
		if err != nil {
			t.Skip("encoding/json refuses it:", err) // a time outside years 0-9999
		}
		if got := appendOrder(nil, ids, o); string(got) != string(want) {
			t.Errorf("appendOrder(%+v)\n got %s\nwant %s", o, got, want)
		}
	})
}
