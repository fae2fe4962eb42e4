package harness

import (
	"testing"

	"github.com/seckill/seckill/loadtest/verify"
)

func TestSkuStock(t *testing.T) {
	c := Config{Stock: 1003, SKUs: 100}
	var sum int64
	for i := range c.SKUs {
		sum += c.skuStock(i)
	}
	if sum != 1003 || c.skuStock(0) != 11 || c.skuStock(99) != 10 {
		t.Errorf("skuStock over 100 SKUs of 1003: sum %d, first %d, last %d; want 1003, 11, 10", sum, c.skuStock(0), c.skuStock(99))
	}
}

func TestSplitClients(t *testing.T) {
	r := &run{skuIDs: []int64{7, 8}}
	in := verify.Clients{
		Acknowledged: []verify.Ack{{OrderID: 1, UserID: "lt1-s7-u1"}, {OrderID: 2, UserID: "lt1-s8-r3-other"}},
		Unsure:       []string{"lt1-s8-u5"},
		Refused:      []verify.Refusal{{Key: "lt1-k9", UserID: "lt1-s7-u9", Code: "sold_out"}},
	}
	got, err := r.splitClients(in)
	if err != nil {
		t.Fatalf("splitClients() error: %v", err)
	}
	if a := got[7].Acknowledged; len(a) != 1 || a[0].OrderID != 1 || len(got[7].Refused) != 1 || len(got[7].Unsure) != 0 {
		t.Errorf("sku 7: %+v; want order 1 and the refusal", got[7])
	}
	if a := got[8].Acknowledged; len(a) != 1 || a[0].OrderID != 2 || len(got[8].Unsure) != 1 {
		t.Errorf("sku 8: %+v; want order 2 and one unsure buyer", got[8])
	}
	// A record of a buyer of no SKU of the sale could hide a lost order.
	for _, user := range []string{"lt1-u1", "lt1-s9-u1"} {
		if _, err := r.splitClients(verify.Clients{Unsure: []string{user}}); err == nil {
			t.Errorf("splitClients(buyer %q) = nil error; want an error", user)
		}
	}
	// One SKU: every buyer is its, whatever the id.
	one := &run{skuIDs: []int64{7}}
	if got, err := one.splitClients(verify.Clients{Unsure: []string{"lt1-u1"}}); err != nil || len(got[7].Unsure) != 1 {
		t.Errorf("one SKU: splitClients = %+v, %v; want the buyer on sku 7", got, err)
	}
}
