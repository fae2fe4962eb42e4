package app_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"
)

// The kinds of acknowledged write the failover test follows.
const (
	kindOrders   = "orders"
	kindPayments = "payments"
	kindCancels  = "cancels"
	kindStock    = "stock changes"
)

var writeKinds = []string{kindOrders, kindPayments, kindCancels, kindStock}

// buyers are the failover test's clients: buyers who order one unit
// each, once, with their own key, then pay or cancel; the payment system;
// and an admin who restocks. They keep what was acknowledged.
type buyers struct {
	urls []string
	sku  int64

	mu        sync.Mutex
	acked     map[string]bool   // buyers whose order was acknowledged (201/200)
	ids       map[string]string // buyer → the order id they were told
	paid      map[string]bool   // buyers whose payment was answered 200
	cancelled map[string]bool   // buyers whose cancel was answered 200
	total     int64             // total_stock the last acknowledged restock left; 0: none
	statuses  map[string]int    // answers by request, status and code
}

func newBuyers(urls []string, sku int64) *buyers {
	return &buyers{urls: urls, sku: sku, acked: map[string]bool{}, ids: map[string]string{},
		paid: map[string]bool{}, cancelled: map[string]bool{}, statuses: map[string]int{}}
}

// buy sends n new buyers of phase at once and returns those whose answer
// was 503 (unknown or unavailable).
func (b *buyers) buy(t *testing.T, phase string, n int) []string {
	t.Helper()
	users := make([]string, n)
	for i := range users {
		users[i] = fmt.Sprintf("%s-%d", phase, i)
	}
	return b.all(t, users, b.order)
}

// all runs do for every user at once and returns those answered 503.
func (b *buyers) all(t *testing.T, users []string, do func(*testing.T, string, int) int) []string {
	t.Helper()
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		unknown []string
	)
	for i, u := range users {
		wg.Go(func() {
			if do(t, u, i) == http.StatusServiceUnavailable {
				mu.Lock()
				unknown = append(unknown, u)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return unknown
}

// retry runs do again for each user while it answers 503, at most 40
// times each: the buyers' retries with their keys, the payment system's
// and the admin's (each write is idempotent).
func (b *buyers) retry(t *testing.T, users []string, do func(*testing.T, string, int) int) {
	t.Helper()
	var wg sync.WaitGroup
	for i, u := range users {
		wg.Go(func() {
			for range 40 {
				if do(t, u, i) != http.StatusServiceUnavailable {
					return
				}
				time.Sleep(250 * time.Millisecond) // a client's back-off
			}
			t.Errorf("%s: still 503 after 40 tries", u)
		})
	}
	wg.Wait()
}

// order places user's order of one unit through instance i.
func (b *buyers) order(t *testing.T, user string, i int) int {
	body := fmt.Sprintf(`{"sku_id":%d,"user_id":%q,"quantity":1}`, b.sku, user)
	status, answer := b.send(t, "order", i, http.MethodPost, "/api/v1/orders", body, "Idempotency-Key", user)
	if status == http.StatusCreated || status == http.StatusOK {
		b.mu.Lock()
		b.acked[user] = true
		b.ids[user], _ = answer["order_id"].(string)
		b.mu.Unlock()
	}
	return status
}

// pay confirms the payment of user's order, as the payment system does.
func (b *buyers) pay(t *testing.T, user string, i int) int {
	return b.settle(t, "pay", user, i, "/internal/v1/orders/"+b.id(user)+"/paid", "paid", b.paid, "Authorization", "Bearer "+paymentToken)
}

// cancel cancels user's order (auth.shopper none: the order id is the key).
func (b *buyers) cancel(t *testing.T, user string, i int) int {
	return b.settle(t, "cancel", user, i, "/api/v1/orders/"+b.id(user)+"/cancel", "cancelled", b.cancelled)
}

// settle pays or cancels user's pending order: 200 with the order in
// status is kept in acked, 503 is left to a retry, anything else fails.
func (b *buyers) settle(t *testing.T, kind, user string, i int, path, status string, acked map[string]bool, headers ...string) int {
	code, answer := b.send(t, kind, i, http.MethodPost, path, "", headers...)
	switch {
	case code == http.StatusOK && answer["status"] == status:
		b.mu.Lock()
		acked[user] = true
		b.mu.Unlock()
	case code != http.StatusServiceUnavailable:
		t.Errorf("%s of %s's order = %d %v; want 200 %s or 503", kind, user, code, answer, status)
	}
	return code
}

// restockTo is the admin's PUT of the remaining stock, as a do of all and
// retry; an acknowledged one sets total_stock to its answer's stock +
// sold, which nothing but another restock changes.
func (b *buyers) restockTo(stock int64) func(*testing.T, string, int) int {
	return func(t *testing.T, _ string, i int) int {
		path := fmt.Sprintf("/admin/v1/skus/%d/stock", b.sku)
		code, answer := b.send(t, "restock", i, http.MethodPut, path, fmt.Sprintf(`{"stock":%d}`, stock), "Authorization", "Bearer "+token)
		switch {
		case code == http.StatusOK:
			left, _ := answer["stock"].(float64)
			sold, _ := answer["sold"].(float64)
			b.mu.Lock()
			b.total = int64(left + sold)
			b.mu.Unlock()
		case code != http.StatusServiceUnavailable:
			t.Errorf("restock to %d = %d %v; want 200 or 503", stock, code, answer)
		}
		return code
	}
}

// send sends one request through instance i and counts its answer by
// kind, status and code; a dropped connection is a 503 (unknown).
func (b *buyers) send(t *testing.T, kind string, i int, method, path, body string, headers ...string) (int, map[string]any) {
	req, err := http.NewRequest(method, b.urls[i%len(b.urls)]+path, strings.NewReader(body))
	if err != nil {
		t.Error(err)
		return 0, nil
	}
	req.Header.Set("Content-Type", "application/json")
	for j := 0; j+1 < len(headers); j += 2 {
		req.Header.Set(headers[j], headers[j+1])
	}
	resp, err := client.Do(req)
	if err != nil {
		return http.StatusServiceUnavailable, nil
	}
	defer resp.Body.Close()
	var answer map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&answer) // a body that is not JSON is counted by its status alone
	b.mu.Lock()
	b.statuses[strings.TrimSpace(fmt.Sprintf("%s %d %s", kind, resp.StatusCode, errCode(answer)))]++
	b.mu.Unlock()
	return resp.StatusCode, answer
}

func (b *buyers) id(user string) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.ids[user]
}

// ackedOf returns phase's buyers whose order was acknowledged, sorted.
func (b *buyers) ackedOf(phase string) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for u := range b.acked {
		if strings.HasPrefix(u, phase+"-") {
			out = append(out, u)
		}
	}
	sort.Strings(out)
	return out
}

func (b *buyers) count(m map[string]bool) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(m)
}

// lostOn reads the survivor and returns, by kind, the acknowledged writes
// it lacks (an order not there, a payment whose order is not paid, a
// cancel whose order is not cancelled, a restock whose total_stock is not
// there) and how many were acknowledged.
func (b *buyers) lostOn(t *testing.T, survivor *gorm.DB) (lost map[string][]string, acked map[string]int) {
	t.Helper()
	var rows []struct{ UserID, Status string }
	if err := survivor.Raw("SELECT user_id, status FROM orders WHERE sku_id = ?", b.sku).Scan(&rows).Error; err != nil {
		t.Fatal(err)
	}
	status := map[string]string{}
	for _, r := range rows {
		status[r.UserID] = r.Status
	}
	var total int64
	if err := survivor.Raw("SELECT total_stock FROM skus WHERE id = ?", b.sku).Scan(&total).Error; err != nil {
		t.Fatal(err)
	}
	lost, acked = map[string][]string{}, map[string]int{}
	check := func(kind string, users map[string]bool, there func(string) bool) {
		for u := range users {
			acked[kind]++
			if !there(u) {
				lost[kind] = append(lost[kind], u)
			}
		}
		sort.Strings(lost[kind])
	}
	check(kindOrders, b.acked, func(u string) bool { return status[u] != "" })
	check(kindPayments, b.paid, func(u string) bool { return status[u] == "paid" })
	check(kindCancels, b.cancelled, func(u string) bool { return status[u] == "cancelled" })
	if b.total != 0 {
		acked[kindStock] = 1
		if total != b.total {
			lost[kindStock] = []string{fmt.Sprintf("total_stock %d, acknowledged %d", total, b.total)}
		}
	}
	return lost, acked
}
