package verify_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill/loadtest/verify"
)

// TestFromAPI pages through a fake admin API and compares the result with
// the database's view of the same sale.
func TestFromAPI(t *testing.T) {
	t.Parallel()
	skuID := seedSale(t, seedStock)
	dbSnap, err := verify.FromDB(context.Background(), testDB, skuID)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range dbSnap.Orders {
		if o.CreatedAt.IsZero() || time.Since(o.CreatedAt) > time.Hour || time.Since(o.CreatedAt) < -time.Hour {
			t.Fatalf("FromDB() order %d created_at = %v; want about now", o.ID, o.CreatedAt)
		}
	}

	for _, tc := range []struct {
		name   string
		orders []verify.Order
		sold   int64
		want   []string
	}{
		{name: "agrees", orders: dbSnap.Orders, sold: dbSnap.SKU.Sold},
		{name: "order missing and sold wrong", orders: dbSnap.Orders[1:], sold: dbSnap.SKU.Sold - 1, want: []string{verify.APIDisagreesWithDatabase}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const token = "0123456789abcdef-token"
			srv := httptest.NewServer(fakeAdmin(t, token, skuID, tc.sold, seedStock-tc.sold, tc.orders))
			t.Cleanup(srv.Close)
			apiSnap, err := verify.FromAPI(context.Background(), getter(srv.Client(), token), srv.URL, skuID)
			if err != nil {
				t.Fatalf("FromAPI() error: %v", err)
			}
			if len(apiSnap.Orders) != len(tc.orders) {
				t.Fatalf("FromAPI() read %d orders; want %d", len(apiSnap.Orders), len(tc.orders))
			}
			var got []string
			for _, v := range verify.Compare(dbSnap, apiSnap) {
				got = append(got, v.Name)
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("Compare() = %v; want %v", got, tc.want)
			}
		})
	}

	t.Run("wrong token", func(t *testing.T) {
		srv := httptest.NewServer(fakeAdmin(t, "right-token-0123456", skuID, 0, 0, nil))
		t.Cleanup(srv.Close)
		if _, err := verify.FromAPI(context.Background(), getter(srv.Client(), "wrong-token-0123456"), srv.URL, skuID); err == nil || !strings.Contains(err.Error(), "401") {
			t.Fatalf("FromAPI(wrong token) error = %v; want status 401", err)
		}
	})
}

// getter is FromAPI's get as the load test's runner does it: an
// authorized GET, refused unless answered 200.
func getter(c *http.Client, token string) func(context.Context, string, any) error {
	return func(ctx context.Context, url string, v any) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := c.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: %d", url, resp.StatusCode)
		}
		return json.NewDecoder(resp.Body).Decode(v)
	}
}

// fakeAdmin serves the admin API's SKU and paged order list, three orders a
// page whatever limit is asked, to exercise the paging.
func fakeAdmin(t *testing.T, token string, skuID, sold, stock int64, orders []verify.Order) http.Handler {
	t.Helper()
	mux := http.NewServeMux()
	auth := func(w http.ResponseWriter, r *http.Request) bool {
		if r.Header.Get("Authorization") != "Bearer "+token {
			w.WriteHeader(http.StatusUnauthorized)
			return false
		}
		return true
	}
	mux.HandleFunc(fmt.Sprintf("GET /admin/v1/skus/%d", skuID), func(w http.ResponseWriter, r *http.Request) {
		if auth(w, r) {
			writeJSON(t, w, map[string]any{"id": skuID, "name": "x", "stock": stock, "sold": sold, "version": 1, "per_user_limit": seedLimit})
		}
	})
	mux.HandleFunc(fmt.Sprintf("GET /admin/v1/skus/%d/orders", skuID), func(w http.ResponseWriter, r *http.Request) {
		if !auth(w, r) {
			return
		}
		after, _ := strconv.ParseInt(strings.TrimPrefix(r.URL.Query().Get("after"), "cursor-"), 10, 64)
		var page []map[string]any
		var next any
		for _, o := range orders {
			if o.ID <= after {
				continue
			}
			if len(page) == 3 {
				next = fmt.Sprintf("cursor-%d", page[2]["id"]) // opaque to the client
				break
			}
			page = append(page, map[string]any{"id": o.ID, "order_id": fmt.Sprintf("opaque-%d", o.ID), "sku_id": skuID, "user_id": o.UserID, "quantity": o.Quantity, "status": o.Status})
		}
		writeJSON(t, w, map[string]any{"orders": page, "next_after": next})
	})
	return mux
}

func writeJSON(t *testing.T, w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(v); err != nil {
		t.Errorf("encode: %v", err)
	}
}
