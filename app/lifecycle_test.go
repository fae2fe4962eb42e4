package app_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill/seckill/app"
	"github.com/seckill/seckill/internal/config"
	"github.com/seckill/seckill/internal/testenv"
)

const paymentToken = "test-payment-token-0123456789"

// stoppable serves cfg until stop (or the test's end) and returns its URL.
func stoppable(t *testing.T, cfg config.Config) (url string, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	addr := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		var out bytes.Buffer
		done <- app.Serve(ctx, cfg, testenv.Logger(), &out, func(a string) { addr <- a })
	}()
	select {
	case a := <-addr:
		var once sync.Once
		stop = func() {
			once.Do(func() {
				cancel()
				if err := <-done; err != nil {
					t.Errorf("shutdown: %v", err)
				}
			})
		}
		t.Cleanup(stop)
		return "http://" + a, stop
	case err := <-done:
		cancel()
		t.Fatalf("service did not start: %v", err)
	case <-time.After(20 * time.Second):
		cancel()
		<-done // done is read once: here, not again in a cleanup
		t.Fatal("service did not start within 20s")
	}
	return "", nil
}

// fate is what a buyer does after their order is placed.
type fate int

const (
	pays        fate = iota // 60%: pays at once
	cancels                 // 10%: cancels at once
	abandons                // 20%: never pays
	paysTooLate             // 10%: pays after expires_at: refused 409 order_expired
)

func fateOf(k int64) fate {
	switch k % 10 {
	case 0, 1:
		return abandons
	case 2:
		return paysTooLate
	case 3:
		return cancels
	}
	return pays
}

// lifecycleLedger is what the buyers were answered, by order id.
type lifecycleLedger struct {
	mu        sync.Mutex
	paid      map[string]bool // 200 to the payment
	refused   map[string]bool // 409 order_expired to a payment
	cancelled map[string]bool // 200 to the cancel
	created   int
}

func (l *lifecycleLedger) add(m map[string]bool, id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	m[id] = true
}

// TestLifecycle_ThreeInstancesResellReturnedUnits: three instances with
// production settings but a payment window of 3 s sell 1,000 units to
// buyers of whom 60% pay, 10% cancel, 20% never pay and 10% pay too late.
// Buyers keep coming until 1,000 orders are paid: only the units that
// cancels and expiries returned can make that happen. One instance is
// stopped midway (its leadership of the sweeper, if it had it, passes to
// another). At the end: 1,000 units paid, none pending, stock 0, the
// invariants hold, every payment answered 200 is a paid order, every one
// refused is an expired order (none both), every cancel answered is a
// cancelled order, and orders placed after the first expiry were paid.
func TestLifecycle_ThreeInstancesResellReturnedUnits(t *testing.T) {
	if testing.Short() {
		t.Skip("sells 1,000 units over three instances")
	}
	t.Parallel()
	const units = 1000
	dsn := testenv.Database(t)
	prefix := testenv.Name("test:lifecycle:") + ":"
	urls := make([]string, 3)
	stops := make([]func(), 3)
	for i := range urls {
		cfg := config.Default()
		cfg.HTTP.Addr = "127.0.0.1:0"
		cfg.MySQL.DSN = dsn
		cfg.MySQL.MaxOpenConns, cfg.MySQL.MaxIdleConns = 16, 16
		cfg.Redis.Addrs = []string{testenv.RedisAddr()}
		cfg.Admin.Token = token
		cfg.Auth.PaymentTokens = paymentToken
		noShopperAuth(&cfg)
		cfg.Lock.Prefix = prefix
		cfg.Order.PaymentTimeout = 3 * time.Second
		urls[i], stops[i] = stoppable(t, cfg)
	}
	status, body := call(t, http.MethodPost, urls[0]+"/admin/v1/skus", fmt.Sprintf(`{"name":"lifecycle","stock":%d,"per_user_limit":1}`, units), "Authorization", "Bearer "+token)
	if status != http.StatusCreated {
		t.Fatalf("create sku = %d %v", status, body)
	}
	skuID := int64(body["id"].(float64))

	var (
		routing  sync.RWMutex             // held (read) for each request, so an instance leaves the rotation before it stops
		live     atomic.Pointer[[]string] // the instances still serving
		users    atomic.Int64
		paidN    atomic.Int64
		stopOnce sync.Once
		late     sync.WaitGroup
		ledger   = lifecycleLedger{paid: map[string]bool{}, refused: map[string]bool{}, cancelled: map[string]bool{}}
	)
	live.Store(&urls)
	// send sends one request of buyer k to a live instance.
	send := func(k int64, method, path, body string, headers ...string) (int, map[string]any) {
		routing.RLock()
		defer routing.RUnlock()
		l := *live.Load()
		return call(t, method, l[int(k)%len(l)]+path, body, headers...)
	}
	// retried sends a lifecycle call again after a 503, as the payment
	// system and a shopper's app do (it is idempotent), a few times.
	retried := func(k int64, path string, headers ...string) (status int, body map[string]any) {
		for attempt := range 5 {
			if status, body = send(k+int64(attempt), http.MethodPost, path, "", headers...); status != http.StatusServiceUnavailable {
				break
			}
			time.Sleep(100 * time.Millisecond) // the client's back-off after a 503
		}
		return status, body
	}
	pay := func(k int64, id string) (int, string) {
		status, body := retried(k, "/internal/v1/orders/"+id+"/paid", "Authorization", "Bearer "+paymentToken)
		return status, errCode(body)
	}

	deadline := time.Now().Add(3 * time.Minute)
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for paidN.Load() < units && time.Now().Before(deadline) {
				k := users.Add(1)
				status, body := send(k, http.MethodPost, "/api/v1/orders", fmt.Sprintf(`{"sku_id":%d,"user_id":"buyer-%d","quantity":1}`, skuID, k))
				switch status {
				case http.StatusCreated:
				case http.StatusConflict, http.StatusServiceUnavailable, http.StatusTooManyRequests:
					time.Sleep(50 * time.Millisecond) // waiting for units to come back; bounded by the deadline
					continue
				default:
					t.Errorf("order = %d %v", status, body)
					return
				}
				id, _ := body["order_id"].(string)
				if body["status"] != "pending" || body["expires_at"] == nil {
					t.Errorf("a new order = %v; want pending with expires_at", body)
				}
				ledger.mu.Lock()
				ledger.created++
				ledger.mu.Unlock()
				switch fateOf(k) {
				case pays:
					switch st, code := pay(k, id); {
					case st == http.StatusOK:
						ledger.add(ledger.paid, id)
						if paidN.Add(1) == units/2 {
							// Midway an instance goes; another may take over the sweeper.
							stopOnce.Do(func() {
								routing.Lock() // no request is on its way to instance 0 once this is held
								rest := urls[1:]
								live.Store(&rest)
								routing.Unlock()
								stops[0]()
							})
						}
					case st == http.StatusConflict && code == "order_expired": // the machine was slower than the window
						ledger.add(ledger.refused, id)
					default:
						t.Errorf("payment = %d %s", st, code)
					}
				case cancels:
					if st, body := retried(k, "/api/v1/orders/"+id+"/cancel"); st != http.StatusOK || body["status"] != "cancelled" {
						t.Errorf("cancel = %d %v", st, body)
					} else {
						ledger.add(ledger.cancelled, id)
					}
				case paysTooLate:
					due, err := time.Parse(time.RFC3339Nano, body["expires_at"].(string))
					if err != nil {
						t.Errorf("expires_at: %v", err)
						continue
					}
					late.Add(1)
					go func() {
						defer late.Done()
						time.Sleep(time.Until(due) + 10*time.Millisecond) // the buyer comes back after the window; not synchronisation
						if st, code := pay(k, id); st != http.StatusConflict || code != "order_expired" {
							t.Errorf("a payment after expires_at = %d %s; want 409 order_expired", st, code)
						} else {
							ledger.add(ledger.refused, id)
						}
					}()
				}
			}
		}()
	}
	wg.Wait()
	late.Wait()
	if n := paidN.Load(); n != units {
		t.Fatalf("%d orders paid by the deadline; want %d", n, units)
	}
	db := testenv.DB(t, dsn)
	// What was abandoned last expires within the window plus a sweep.
	waitPending := time.Now().Add(30 * time.Second)
	for {
		var pending int64
		db.Raw("SELECT COUNT(*) FROM orders WHERE sku_id = ? AND status = 'pending'", skuID).Scan(&pending)
		if pending == 0 {
			break
		}
		if time.Now().After(waitPending) {
			t.Fatalf("%d orders still pending 30s after the sale", pending)
		}
		time.Sleep(50 * time.Millisecond) // polling, bounded above
	}

	if st, v := call(t, http.MethodGet, fmt.Sprintf("%s/admin/v1/skus/%d", urls[1], skuID), "", "Authorization", "Bearer "+token); st != http.StatusOK ||
		v["sold"] != float64(units) || v["paid"] != float64(units) || v["pending"] != float64(0) || v["stock"] != float64(0) {
		t.Errorf("admin view = %d %v; want sold = paid = %d, pending 0, stock 0", st, v, units)
	}
	if sold := testenv.CheckInvariants(t, db, skuID); sold != units {
		t.Errorf("sold = %d; want %d", sold, units)
	}
	var statuses []struct {
		ID     int64
		Status string
	}
	db.Raw("SELECT id, status FROM orders WHERE sku_id = ?", skuID).Scan(&statuses)
	byStatus := map[string]int{}
	for _, s := range statuses {
		byStatus[s.Status]++
	}
	if byStatus["paid"] != units || byStatus["pending"] != 0 || len(statuses) != ledger.created {
		t.Errorf("orders by status %v of %d; want %d paid, none pending, %d created", byStatus, len(statuses), units, ledger.created)
	}
	if byStatus["expired"] == 0 || byStatus["cancelled"] != len(ledger.cancelled) {
		t.Errorf("orders by status %v; want some expired and %d cancelled", byStatus, len(ledger.cancelled))
	}
	checkAnswers(t, urls[1], ledger.paid, "paid")
	checkAnswers(t, urls[1], ledger.refused, "expired")
	checkAnswers(t, urls[1], ledger.cancelled, "cancelled")
	var resold int64
	db.Raw(`SELECT COUNT(*) FROM orders WHERE sku_id = ? AND status = 'paid' AND created_at >
		(SELECT MIN(settled_at) FROM orders WHERE sku_id = ? AND status = 'expired')`, skuID, skuID).Scan(&resold)
	if resold == 0 {
		t.Error("no order placed after the first expiry was paid: returned units were not sold again")
	}
	metrics := get(t, urls[1]+"/metrics") + get(t, urls[2]+"/metrics") // one of them took the sweeper over
	for _, series := range []string{`seckill_orders_settled_total{status="paid"}`, `seckill_units_returned_total{status="cancelled"}`, "seckill_sweep_seconds_bucket", "seckill_sweep_lag_seconds", "seckill_sweeper_leader"} {
		if !strings.Contains(metrics, series) {
			t.Errorf("/metrics lacks %s", series)
		}
	}
	t.Logf("%d orders: %v; %d paid after the first expiry; %d payments refused as expired", len(statuses), byStatus, resold, len(ledger.refused))
}

// checkAnswers reads every order in ids through the API (auth none: the
// opaque id is the key) and wants each in status.
func checkAnswers(t *testing.T, url string, ids map[string]bool, status string) {
	t.Helper()
	for id := range ids {
		if st, body := call(t, http.MethodGet, url+"/api/v1/orders/"+id, ""); st != http.StatusOK || body["status"] != status {
			t.Errorf("order %s = %d %v; its answer says %s", id, st, body, status)
		}
	}
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := client.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

func errCode(body map[string]any) string {
	e, _ := body["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}
