package app_test

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/seckill/seckill/internal/testenv"
)

// newSKU creates a SKU through the admin API and returns its id.
func newSKU(t *testing.T, url string, stock, perUser int) int64 {
	t.Helper()
	status, sku := call(t, http.MethodPost, url+"/admin/v1/skus",
		fmt.Sprintf(`{"name":"metrics","stock":%d,"per_user_limit":%d}`, stock, perUser), "Authorization", "Bearer "+token)
	if status != http.StatusCreated {
		t.Fatalf("create sku: %d %v", status, sku)
	}
	return int64(sku["id"].(float64))
}

// scrape reads GET /metrics in the text exposition format.
func scrape(t *testing.T, url string) metricFamilies {
	t.Helper()
	resp, err := client.Get(url + "/metrics")
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics = %d; want 200", resp.StatusCode)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return fams
}

type metricFamilies map[string]*dto.MetricFamily

// matching returns the series of name whose labels include labels
// (name, value pairs).
func (f metricFamilies) matching(name string, labels ...string) []*dto.Metric {
	fam := f[name]
	if fam == nil {
		return nil
	}
	var out []*dto.Metric
	for _, m := range fam.GetMetric() {
		ok := true
		for i := 0; i+1 < len(labels); i += 2 {
			found := false
			for _, lp := range m.GetLabel() {
				found = found || (lp.GetName() == labels[i] && lp.GetValue() == labels[i+1])
			}
			ok = ok && found
		}
		if ok {
			out = append(out, m)
		}
	}
	return out
}

// value sums the counters or gauges of name matching labels; an absent
// series counts 0.
func (f metricFamilies) value(name string, labels ...string) float64 {
	v := 0.0
	for _, m := range f.matching(name, labels...) {
		v += m.GetCounter().GetValue() + m.GetGauge().GetValue() + m.GetUntyped().GetValue()
	}
	return v
}

// histogram sums the count and the sum of the histograms of name matching labels.
func (f metricFamilies) histogram(name string, labels ...string) (uint64, float64) {
	var n uint64
	var sum float64
	for _, m := range f.matching(name, labels...) {
		n += m.GetHistogram().GetSampleCount()
		sum += m.GetHistogram().GetSampleSum()
	}
	return n, sum
}

// TestMetricsOfASale runs a small sale and checks that /metrics says
// what the buyers were told: the counters are exact, not just present.
func TestMetricsOfASale(t *testing.T) {
	t.Parallel()
	const stock, buyers, late = 20, 30, 5
	dsn := testenv.Database(t)
	url := instance(t, dsn, testenv.RedisAddr(), testenv.Name("test:metrics:")+":")
	skuID := newSKU(t, url, stock, 1)

	type result struct {
		status int
		code   string
	}
	var (
		mu      sync.Mutex
		results []result
		wg      sync.WaitGroup
		start   = make(chan struct{})
	)
	buy := func(i int, key bool) {
		headers := []string(nil)
		if key {
			headers = []string{"Idempotency-Key", fmt.Sprintf("metrics-%d", i)}
		}
		status, body := call(t, http.MethodPost, url+"/api/v1/orders",
			fmt.Sprintf(`{"sku_id":%d,"user_id":"metrics-user-%d","quantity":1}`, skuID, i), headers...)
		code := ""
		if e, ok := body["error"].(map[string]any); ok {
			code, _ = e["code"].(string)
		}
		mu.Lock()
		results = append(results, result{status, code})
		mu.Unlock()
	}
	for i := range buyers {
		wg.Go(func() {
			<-start
			buy(i, true)
		})
	}
	close(start)
	wg.Wait()
	// After the sell-out, without keys: the sold-out mark answers.
	for i := range late {
		buy(buyers+i, false)
	}

	var created, soldOut int
	for _, r := range results {
		switch {
		case r.status == http.StatusCreated:
			created++
		case r.status == http.StatusConflict && r.code == "sold_out":
			soldOut++
		default:
			t.Errorf("a buyer got %d %q; want 201 or 409 sold_out", r.status, r.code)
		}
	}
	if created != stock || soldOut != buyers+late-stock {
		t.Fatalf("%d created, %d sold out; want %d and %d", created, soldOut, stock, buyers+late-stock)
	}

	m := scrape(t, url)
	fastPath := m.value("seckill_soldout_fastpath_total")
	batches, batched := m.histogram("seckill_batch_size")
	txs, _ := m.histogram("seckill_tx_seconds")
	txErrors, _ := m.histogram("seckill_tx_seconds", "outcome", "error")
	obtained, _ := m.histogram("seckill_lock_acquire_seconds", "outcome", "obtained")
	lockAll, _ := m.histogram("seckill_lock_acquire_seconds")
	checks := []struct {
		name      string
		got, want float64
	}{
		{`seckill_orders_total{result="created"}`, m.value("seckill_orders_total", "result", "created"), float64(created)},
		{`seckill_orders_total{result="sold_out"}`, m.value("seckill_orders_total", "result", "sold_out"), float64(soldOut)},
		{`seckill_orders_total (all results)`, m.value("seckill_orders_total"), float64(buyers + late)},
		// Every sold-out answer came either from the fast path or from a batch.
		{`seckill_batch_size sum`, batched, float64(created+soldOut) - fastPath},
		{`seckill_tx_seconds count`, float64(txs), float64(batches)},
		{`seckill_tx_seconds{outcome="error"} count`, float64(txErrors), 0},
		// One instance, Redis up: every acquisition succeeded.
		{`seckill_lock_acquire_seconds count`, float64(lockAll), float64(obtained)},
		{`seckill_degraded`, m.value("seckill_degraded"), 0},
		{`seckill_queue_rejections_total`, m.value("seckill_queue_rejections_total"), 0},
		{`seckill_tx_retries_total`, m.value("seckill_tx_retries_total"), 0},
		{`seckill_http_requests_total{route="/api/v1/orders",code="201"}`, m.value("seckill_http_requests_total", "route", "/api/v1/orders", "code", "201"), float64(created)},
		{`seckill_http_requests_total{route="/api/v1/orders",code="409"}`, m.value("seckill_http_requests_total", "route", "/api/v1/orders", "code", "409"), float64(soldOut)},
		{`seckill_http_requests_total{route="/api/v1/orders"}`, m.value("seckill_http_requests_total", "route", "/api/v1/orders"), float64(buyers + late)},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %v; want %v", c.name, c.got, c.want)
		}
	}
	// A busy worker keeps its lock across batches (lock.hold_max): at most
	// one acquisition per batch, at least one for the sale.
	if obtained < 1 || obtained > batches {
		t.Errorf("lock acquisitions = %d for %d batches; want 1 to %d", obtained, batches, batches)
	}
	// A batch under a lease's hold brings the row the one before it left,
	// and is decided on it or reads it again; a lease's first batch brings
	// none, nor does a keyed batch after the sell-out, which commits
	// unlocked (a replay check, outside anyone's turn).
	known := m.value("seckill_tx_known_row_total", "outcome", "used") + m.value("seckill_tx_known_row_total", "outcome", "read")
	if known > float64(batches-obtained) {
		t.Errorf("seckill_tx_known_row_total = %v; want at most %d (batches %d - leases %d)", known, batches-obtained, batches, obtained)
	}
	if batches < 1 || batches > uint64(created) {
		t.Errorf("seckill_batch_size count = %d; want 1 to %d (the sale took at least one batch, each selling one or more)", batches, created)
	}
	if fastPath < late || fastPath > float64(soldOut) {
		t.Errorf("seckill_soldout_fastpath_total = %v; want %d (the late buyers) to %d (every sold-out answer)", fastPath, late, soldOut)
	}
	// Histograms and the request counter: each request is timed once.
	if n, _ := m.histogram("seckill_http_request_seconds", "route", "/api/v1/orders"); n != uint64(buyers+late) {
		t.Errorf("seckill_http_request_seconds{route=\"/api/v1/orders\"} count = %d; want %d", n, buyers+late)
	}
	for _, name := range []string{"go_goroutines", "process_resident_memory_bytes"} {
		if m[name] == nil {
			t.Errorf("%s missing: the Go and process collectors are not registered", name)
		}
	}
}

// TestMetricsDegradedWhileRedisIsDown stops Redis under a running
// instance: an order is still sold, on the database's guard, and both
// /metrics and /readyz say degraded until Redis is back.
func TestMetricsDegradedWhileRedisIsDown(t *testing.T) {
	t.Parallel()
	srv := testenv.StartRedis(t)
	dsn := testenv.Database(t)
	url := instance(t, dsn, srv.Addr, testenv.Name("test:metrics:")+":")
	skuID := newSKU(t, url, 100, 1)
	// A buyer retries a 503 with the same key, as the contract asks: a
	// batch under the lease taken before Redis went down is stopped, before
	// its COMMIT, when the watchdog finds that lease may have run out.
	order := func(user string) int {
		var (
			status int
			body   map[string]any
		)
		for try := 0; try < 3; try++ {
			status, body = call(t, http.MethodPost, url+"/api/v1/orders",
				fmt.Sprintf(`{"sku_id":%d,"user_id":%q,"quantity":1}`, skuID, user), "Idempotency-Key", user)
			if status != http.StatusServiceUnavailable || !unavailable(body) {
				break
			}
		}
		if status != http.StatusCreated {
			t.Errorf("order of %s = %d %v; want 201", user, status, body)
		}
		return status
	}

	order("before")
	if m := scrape(t, url); m.value("seckill_degraded") != 0 {
		t.Errorf("seckill_degraded with Redis up = %v; want 0", m.value("seckill_degraded"))
	}

	srv.Stop()
	// The worker may still hold the lease it took before (lock.hold_idle,
	// until the lease is let go or found lost): orders sell under it. The
	// first order that needs the lock finds Redis unavailable. Bounded
	// polling, one buyer a try.
	deadline := time.Now().Add(15 * time.Second)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var m metricFamilies
	created := 1
	for i := 0; ; i++ {
		if order(fmt.Sprintf("during-%d", i)) != http.StatusCreated {
			return
		}
		created++
		if m = scrape(t, url); m.value("seckill_degraded") == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("seckill_degraded still 0 15s after Redis went down")
		}
		<-tick.C
	}
	if n, _ := m.histogram("seckill_lock_acquire_seconds", "outcome", "unavailable"); n < 1 {
		t.Errorf(`seckill_lock_acquire_seconds{outcome="unavailable"} count = %d; want at least 1`, n)
	}
	if got := m.value("seckill_orders_total", "result", "created"); got != float64(created) {
		t.Errorf(`seckill_orders_total{result="created"} = %v; want %d`, got, created)
	}
	status, ready := call(t, http.MethodGet, url+"/readyz", "")
	if status != http.StatusOK || ready["status"] != "degraded" || ready["redis"] != "down" || ready["mysql"] != "up" {
		t.Errorf("/readyz with Redis down = %d %v; want 200 degraded, redis down, mysql up", status, ready)
	}

	// Back: once the probe interval has passed, an order takes the lock
	// again and the gauge falls to 0. Bounded polling, one buyer a try.
	srv.Start()
	deadline = time.Now().Add(15 * time.Second)
	for i := 0; ; i++ {
		if order(fmt.Sprintf("after-%d", i)) != http.StatusCreated {
			break
		}
		if scrape(t, url).value("seckill_degraded") == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("seckill_degraded still 1 15s after Redis came back")
		}
		<-tick.C
	}
	// /readyz reuses one round of checks for http.ready_cache: it says so
	// within that period, bounded here by the deadline.
	for {
		status, ready = call(t, http.MethodGet, url+"/readyz", "")
		if status == http.StatusOK && ready["status"] == "ok" && ready["redis"] == "up" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz with Redis back = %d %v; want 200 ok, redis up", status, ready)
		}
		<-tick.C
	}
}

// TestMetricsExportTheDatabasePool: the pool's sql.DBStats are series
// (client_golang's DB stats collector, db_name "seckill"): its limit is
// mysql.max_open_conns, and WaitCount, the series docs/operations.md's
// sizing advice watches, is there from the start.
func TestMetricsExportTheDatabasePool(t *testing.T) {
	t.Parallel()
	url := instance(t, testenv.Database(t), testenv.RedisAddr(), testenv.Name("test:pool:")+":")
	newSKU(t, url, 1, 1) // the pool has served a request
	fams := scrape(t, url)
	for _, c := range []struct {
		name string
		ok   func(float64) bool
		want string
	}{
		{"go_sql_max_open_connections", func(v float64) bool { return v == 16 }, "16 (mysql.max_open_conns)"},
		{"go_sql_open_connections", func(v float64) bool { return v >= 1 }, ">= 1"},
		{"go_sql_wait_count_total", func(v float64) bool { return v >= 0 }, "present"},
		{"go_sql_wait_duration_seconds_total", func(v float64) bool { return v >= 0 }, "present"},
	} {
		if len(fams.matching(c.name, "db_name", "seckill")) != 1 {
			t.Errorf("%s{db_name=\"seckill\"}: absent from /metrics", c.name)
			continue
		}
		if v := fams.value(c.name, "db_name", "seckill"); !c.ok(v) {
			t.Errorf("%s = %v; want %s", c.name, v, c.want)
		}
	}
}

// unavailable reports whether an error body says nothing happened (503
// unavailable), which a retry with the same key may repeat.
func unavailable(body map[string]any) bool {
	e, _ := body["error"].(map[string]any)
	return e["code"] == "unavailable"
}
