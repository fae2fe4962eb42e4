package repository

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/service"
)

func newSKU(t *testing.T, s *MySQL, stock int64) service.SKU {
	t.Helper()
	now := time.Now().UTC()
	sku, err := s.CreateSKU(context.Background(), service.SKU{Name: "g", TotalStock: stock, Stock: stock, PerUserLimit: 1, CreatedAt: now, UpdatedAt: now})
	if err != nil {
		t.Fatal(err)
	}
	return sku
}

// newMember is a batch of one unit for each of users, as a transaction's
// member.
func newMember(skuID int64, users ...string) *member {
	b := service.Batch{SKUID: skuID, Now: time.Now().UTC().Truncate(time.Microsecond)}
	for _, u := range users {
		b.Requests = append(b.Requests, service.OrderRequest{SKUID: skuID, UserID: u, Quantity: 1})
	}
	return &member{b: b}
}

// A round commits its batches in one transaction and answers each; a
// SKU that does not exist is that batch's own answer. A round that meets a
// row held elsewhere fails as a whole after its short lock wait, having
// committed nothing, and says it could begin a transaction (the service
// then commits the batches alone).
func TestCommitRound(t *testing.T) {
	t.Parallel()
	db := testenv.DB(t, testenv.Database(t))
	s := NewMySQL(db)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a, b := newSKU(t, s, 10), newSKU(t, s, 10)
	bs := []service.Batch{newMember(a.ID, "a1", "a2").b, newMember(1<<40, "x").b, newMember(b.ID, "b1").b}
	res, err := s.CommitRound(ctx, bs)
	if err != nil || len(res) != len(bs) {
		t.Fatalf("CommitRound = %d answers, %v; want %d answers", len(res), err, len(bs))
	}
	if !errors.Is(res[1].Err, service.ErrSKUNotFound) {
		t.Errorf("the unknown sku's answer = %v; want ErrSKUNotFound", res[1].Err)
	}
	for _, i := range []int{0, 2} {
		n := int64(len(bs[i].Requests))
		if res[i].Err != nil || len(res[i].Outcomes) != int(n) || res[i].SKU.Sold != n {
			t.Errorf("sku %d = %+v; want %d orders", bs[i].SKUID, res[i], n)
		}
		if sold, stock, orders := testenv.SoldAndOrders(t, db, bs[i].SKUID); sold != n || stock != 10-n || orders != n {
			t.Errorf("sku %d: sold %d stock %d orders %d; want %d, %d, %d", bs[i].SKUID, sold, stock, orders, n, 10-n, n)
		}
	}

	blocker := testenv.HoldRow(t, db, b.ID)
	res, err = s.CommitRound(ctx, []service.Batch{newMember(a.ID, "a3").b, newMember(b.ID, "b2").b})
	if err == nil || errors.Is(err, service.ErrNoTransaction) || res != nil {
		t.Errorf("CommitRound with a held row = %+v, %v; want no answers and an error other than ErrNoTransaction", res, err)
	}
	if err := blocker.Rollback(); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[int64]int64{a.ID: 2, b.ID: 1} {
		if sold, _, orders := testenv.SoldAndOrders(t, db, id); sold != want || orders != want {
			t.Errorf("sku %d after a failed round: sold %d, %d orders; want %d", id, sold, orders, want)
		}
	}
}
