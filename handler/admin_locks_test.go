package handler_test

import (
	"context"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/seckill/seckill/lock"
)

type lockReply struct {
	SKUID       int64      `json:"sku_id"`
	Held        bool       `json:"held"`
	Owner       string     `json:"owner"`
	Token       string     `json:"token"`
	Fence       string     `json:"fence"`
	LeaseLeftMS int64      `json:"lease_left_ms"`
	HeldSince   *time.Time `json:"held_since"`
	Renewed     bool       `json:"renewed"`
	Waiters     int        `json:"waiters"`
}

// TestAdminSKULock: the lock of a SKU read through HTTP from the lock
// store: free, then held by another instance (its name, its token's
// prefix, its fence, a lease the reading does not extend), a fence that
// grows with the next holder, and free again.
func TestAdminSKULock(t *testing.T) {
	s := newStack(t)
	id := s.createSKU(t, `{"name":"lock","stock":5,"per_user_limit":5}`)
	path := "/admin/v1/skus/" + strconv.FormatInt(id, 10) + "/lock"
	ctx := context.Background()
	read := func() lockReply {
		t.Helper()
		r := s.get(t, path, bearer...)
		s.checkDocumented(t, http.MethodGet, path, r)
		if r.status != http.StatusOK {
			t.Fatalf("GET %s = %d %s; want 200", path, r.status, r.body)
		}
		var v lockReply
		r.json(t, &v)
		return v
	}
	if v := read(); v.Held || v.SKUID != id {
		t.Fatalf("lock of a SKU nobody bought = %+v; want free", v)
	}

	// Another instance, on the same Redis and prefix, holds the SKU's lock.
	other := lock.New(s.rdb, lock.WithPrefix(s.prefix), lock.WithOwner("other-instance"))
	key := "{sku:" + strconv.FormatInt(id, 10) + "}"
	l, err := other.Obtain(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	before := s.rdb.PTTL(ctx, s.prefix+key).Val()
	v := read()
	after := s.rdb.PTTL(ctx, s.prefix+key).Val()
	_, token := lock.SplitToken(l.Token())
	if !v.Held || v.Owner != "other-instance" || v.Token != token || v.Fence != strconv.FormatInt(l.Fence(), 10) || !v.Renewed || v.HeldSince == nil {
		t.Errorf("lock held by other-instance = %+v; want held, owner other-instance, token %q, fence %d, renewed, held_since", v, token, l.Fence())
	}
	if v.LeaseLeftMS <= 0 || after > before {
		t.Errorf("lease left %dms; PTTL %v before the read, %v after; want positive and not extended", v.LeaseLeftMS, before, after)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	l2, err := other.Obtain(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if v2 := read(); v2.Fence != strconv.FormatInt(l2.Fence(), 10) || l2.Fence() <= l.Fence() {
		t.Errorf("next holder's fence %s (lock says %d); want it, above the first's %d", v2.Fence, l2.Fence(), l.Fence())
	}
	if err := l2.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if v := read(); v.Held {
		t.Errorf("lock after release = %+v; want free", v)
	}

	for _, c := range []struct {
		name, path string
		headers    []string
		status     int
	}{
		{"no token", path, nil, http.StatusUnauthorized},
		{"unknown sku", "/admin/v1/skus/999999999/lock", bearer, http.StatusNotFound},
		{"bad id", "/admin/v1/skus/x/lock", bearer, http.StatusBadRequest},
	} {
		if r := s.get(t, c.path, c.headers...); r.status != c.status {
			t.Errorf("%s: GET %s = %d %s; want %d", c.name, c.path, r.status, r.body, c.status)
		}
	}
}
