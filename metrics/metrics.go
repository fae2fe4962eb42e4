// Package metrics publishes what the order path, the lock, the HTTP API
// and the database pool do as Prometheus series on GET /metrics. It
// implements service.Observer, engine.Observer, handler.Observer,
// lock.Observer and database.Observer.
package metrics

import (
	"database/sql"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/seckill/seckill/engine"
	"github.com/seckill/seckill/handler"
	"github.com/seckill/seckill/internal/database"
	"github.com/seckill/seckill/lock"
	"github.com/seckill/seckill/service"
)

// Metrics holds the service's series in a registry of its own.
type Metrics struct {
	reg *prometheus.Registry

	orders          *prometheus.CounterVec
	orderResults    map[string]prometheus.Counter // orders' series of every known result, resolved once; read-only
	lockAcquire     *prometheus.HistogramVec
	lockAttempts    prometheus.Histogram
	lockWaiters     *prometheus.GaugeVec
	lockRenewals    *prometheus.CounterVec
	lockLost        prometheus.Counter
	queueDepth      *prometheus.GaugeVec
	queueRejections *prometheus.CounterVec
	batchSize       prometheus.Histogram
	txSeconds       *prometheus.HistogramVec
	txRetries       prometheus.Counter
	degraded        prometheus.Gauge
	soldOutFastPath prometheus.Counter
	markUnpublished prometheus.Counter
	knownRows       *prometheus.CounterVec
	httpRequests    *prometheus.CounterVec
	httpSeconds     *prometheus.HistogramVec
	dbRefused       prometheus.Counter
	unconfirmed     prometheus.Counter
	soldUnlocked    prometheus.Counter
	confirmSeconds  *prometheus.HistogramVec
	waiters         *prometheus.GaugeVec
	allotted        prometheus.Counter
	polls           prometheus.Gauge
	pollsAnswered   *prometheus.CounterVec
	pollHeard       prometheus.Histogram
}

var (
	_ service.Observer      = (*Metrics)(nil)
	_ service.WatchObserver = (*Metrics)(nil)
	_ engine.Observer       = (*Metrics)(nil)
	_ handler.Observer      = (*Metrics)(nil)
	_ lock.Observer         = lockObserver{}
	_ database.Observer     = (*Metrics)(nil)
)

// New registers every series, with the Go and process collectors.
func New() *Metrics {
	latency := []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}
	m := &Metrics{
		reg:             prometheus.NewRegistry(),
		orders:          counterVec("seckill_orders_total", "Order requests answered, by result (created, replayed, sold_out, limit_exceeded, busy, unavailable, ...).", "result"),
		lockAcquire:     histogramVec("seckill_lock_acquire_seconds", "Time to obtain a per-SKU lock, including local queueing, by outcome (obtained; busy: given up while live holders renewed or passed it on; not_obtained: held by a holder that showed no sign of life; unavailable; queue_full).", latency, "outcome"),
		lockAttempts:    histogram("seckill_lock_acquire_attempts", "Redis attempts per lock acquisition.", []float64{0, 1, 2, 3, 5, 10, 20, 50, 100}),
		lockWaiters:     gaugeVec("seckill_lock_waiters", "Goroutines waiting locally for a lock key.", "key"),
		lockRenewals:    counterVec("seckill_lock_renewals_total", "Lease renewals by result (ok, failed).", "result"),
		lockLost:        counter("seckill_lock_lost_total", "Leases found gone while held."),
		queueDepth:      gaugeVec("seckill_queue_depth", "Order requests waiting in a SKU's queue.", "sku"),
		queueRejections: counterVec("seckill_queue_rejections_total", "Order requests refused because the SKU's queue was full (429).", "sku"),
		batchSize:       histogram("seckill_batch_size", "Order requests per transaction.", []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512}),
		txSeconds:       histogramVec("seckill_tx_seconds", "Time to commit one batch, retries included, by outcome (ok, error).", latency, "outcome"),
		txRetries:       counter("seckill_tx_retries_total", "Batch transactions retried after a version or fence conflict."),
		degraded:        gauge("seckill_degraded", "1 while Redis is unreachable and orders are sold on the database's guard alone."),
		soldOutFastPath: counter("seckill_soldout_fastpath_total", "Order requests refused as sold out without a transaction."),
		markUnpublished: counter("seckill_soldout_mark_unpublished_total", "Restocks whose shared sold-out mark could not be written after retries (other instances see them from the database within sold_out.recheck)."),
		knownRows:       counterVec("seckill_tx_known_row_total", "Committed batches that brought the row their lock hold's previous batch left, by outcome (used: decided on it without reading; read: read again, the row, a holding or a key having changed).", "outcome"),
		httpRequests:    counterVec("seckill_http_requests_total", "HTTP requests by route and status code.", "route", "code"),
		httpSeconds:     histogramVec("seckill_http_request_seconds", "HTTP request latency by route.", latency, "route"),
		dbRefused:       counter("seckill_db_connections_refused_total", "New MySQL connections the server refused for having too many (max_connections): instances x mysql.max_open_conns outgrows it; the orders that needed them got 503 unavailable."),
		unconfirmed:     counter("seckill_orders_unconfirmed_total", "Orders committed on the primary that mysql.min_replicas replicas did not confirm within mysql.replica_timeout: answered 503 outcome_unknown (lost if the primary is)."),
		soldUnlocked:    counter("seckill_orders_unlocked_total", "Order requests decided in a batch sold without the SKU's lock while it had stock or buyers asked to wait (the obtain timed out or failed, or Redis was unreachable): the database's guard held for them, first come, first served across instances did not."),
		waiters:         gaugeVec("seckill_waiters", "A SKU's waiting orders (\"wait\": true), as the last commit through this instance that changed or showed them left its row.", "sku"),
		allotted:        counter("seckill_waitlist_allocated_total", "Waiting orders given units (pending, or paid with order.payment_timeout 0) by a cancel, an expiry or a restock committed through this instance."),
		polls:           gauge("seckill_long_polls", "GET /api/v1/orders/{id} held waiting for the order to change (Prefer: wait) on this instance; at most order.long_polls_max."),
		pollsAnswered:   counterVec("seckill_long_polls_answered_total", "Long-polls answered, by how (change: the order changed, 200; timeout: the wait ran out, 304; drain: the instance shut down, 304).", "how"),
		pollHeard:       histogram("seckill_long_poll_heard_seconds", "From a change recorded by the committing instance, just after its COMMIT, to a long-poll answering it, on this instance or another (changes found by the recheck are not observed).", latency),
		confirmSeconds:  histogramVec("seckill_mysql_replica_confirm_seconds", "One wait for mysql.min_replicas replicas to confirm a commit position (MASTER_GTID_WAIT), by outcome (confirmed, timeout): the replica lag the order path sees.", latency, "outcome"),
	}
	m.reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.orders, m.lockAcquire, m.lockAttempts, m.lockWaiters, m.lockRenewals, m.lockLost,
		m.queueDepth, m.queueRejections, m.batchSize, m.txSeconds, m.txRetries,
		m.degraded, m.soldOutFastPath, m.markUnpublished, m.knownRows, m.httpRequests, m.httpSeconds,
		m.dbRefused, m.unconfirmed, m.soldUnlocked, m.confirmSeconds, m.waiters, m.allotted,
		m.polls, m.pollsAnswered, m.pollHeard,
	)
	for _, how := range []string{"change", "timeout", "drain"} {
		m.pollsAnswered.WithLabelValues(how)
	}
	m.knownRows.WithLabelValues("used")
	m.knownRows.WithLabelValues("read")
	m.orderResults = map[string]prometheus.Counter{}
	for _, r := range append(service.OrderResults(), handler.RefusedResults()...) { // every series a dashboard needs exists at 0
		m.orderResults[r] = m.orders.WithLabelValues(r)
	}
	return m
}

// Pool adds the database pool's sql.DBStats as client_golang's go_sql_*
// series (db_name "seckill"): connections open, in use and idle, waits for
// one (go_sql_wait_count_total) and their time, and closes by cause.
func (m *Metrics) Pool(db *sql.DB) error {
	return m.reg.Register(collectors.NewDBStatsCollector(db, "seckill"))
}

// Register adds a collector of series that live elsewhere (the Redis
// topology) to the registry. It fails if one of its series is taken.
func (m *Metrics) Register(c prometheus.Collector) error { return m.reg.Register(c) }

// Handler serves the registry in the Prometheus exposition format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// Request implements handler.Observer.
func (m *Metrics) Request(route string, status int, took time.Duration) {
	m.httpRequests.WithLabelValues(route, strconv.Itoa(status)).Inc()
	m.httpSeconds.WithLabelValues(route).Observe(took.Seconds())
}

// OrderResult implements service.Observer and handler.Observer.
// A known result's series is resolved once: a sold-out refusal, most of
// a sale's answers, does not hash its label per request.
func (m *Metrics) OrderResult(result string) {
	if c, ok := m.orderResults[result]; ok {
		c.Inc()
		return
	}
	m.orders.WithLabelValues(result).Inc()
}

// QueueDepth implements engine.Observer; an empty queue's series is removed.
func (m *Metrics) QueueDepth(skuID int64, depth int) {
	sku := strconv.FormatInt(skuID, 10)
	if depth == 0 {
		m.queueDepth.DeleteLabelValues(sku)
		return
	}
	m.queueDepth.WithLabelValues(sku).Set(float64(depth))
}

// QueueRejected implements engine.Observer.
func (m *Metrics) QueueRejected(skuID int64) {
	m.queueRejections.WithLabelValues(strconv.FormatInt(skuID, 10)).Inc()
}

// Batch implements engine.Observer.
func (m *Metrics) Batch(size int, commit time.Duration, retries int, err error) {
	m.batchSize.Observe(float64(size))
	outcome := "ok"
	if err != nil {
		outcome = "error"
	}
	m.txSeconds.WithLabelValues(outcome).Observe(commit.Seconds())
	m.txRetries.Add(float64(retries))
}

// Degraded implements engine.Observer.
func (m *Metrics) Degraded(on bool) {
	v := 0.0
	if on {
		v = 1
	}
	m.degraded.Set(v)
}

// ConnRefused implements database.Observer.
func (m *Metrics) ConnRefused() { m.dbRefused.Inc() }

// SoldOutFastPath implements service.Observer and engine.Observer.
func (m *Metrics) SoldOutFastPath() { m.soldOutFastPath.Inc() }

// MarkUnpublished implements service.Observer.
func (m *Metrics) MarkUnpublished() { m.markUnpublished.Inc() }

// PollsHeld implements service.WatchObserver.
func (m *Metrics) PollsHeld(n int) { m.polls.Set(float64(n)) }

// PollAnswered implements service.WatchObserver.
func (m *Metrics) PollAnswered(how string, heard time.Duration) {
	m.pollsAnswered.WithLabelValues(how).Inc()
	if heard > 0 {
		m.pollHeard.Observe(heard.Seconds())
	}
}

// Allotted implements service.Observer.
func (m *Metrics) Allotted(orders int) { m.allotted.Add(float64(orders)) }

// Waiters implements service.Observer and engine.Observer.
func (m *Metrics) Waiters(skuID, n int64) {
	m.waiters.WithLabelValues(strconv.FormatInt(skuID, 10)).Set(float64(n))
}

// KnownRow implements engine.Observer.
func (m *Metrics) KnownRow(used bool) {
	outcome := "read"
	if used {
		outcome = "used"
	}
	m.knownRows.WithLabelValues(outcome).Inc()
}

// Unconfirmed implements engine.Observer.
func (m *Metrics) Unconfirmed(orders int) { m.unconfirmed.Add(float64(orders)) }

// SoldUnlocked implements engine.Observer.
func (m *Metrics) SoldUnlocked(orders int) { m.soldUnlocked.Add(float64(orders)) }

// Confirmation implements repository.ReplicaObserver.
func (m *Metrics) Confirmation(wait time.Duration, confirmed bool) {
	outcome := "confirmed"
	if !confirmed {
		outcome = "timeout"
	}
	m.confirmSeconds.WithLabelValues(outcome).Observe(wait.Seconds())
}

// Lock returns the lock.Observer that feeds the seckill_lock_* series.
func (m *Metrics) Lock() lock.Observer { return lockObserver{m} }

type lockObserver struct{ m *Metrics }

func (o lockObserver) Obtained(_ string, attempts int, wait time.Duration, err error) {
	outcome := "obtained"
	switch {
	case errors.Is(err, lock.ErrUnavailable):
		outcome = "unavailable"
	case errors.Is(err, lock.ErrQueueFull):
		outcome = "queue_full"
	case errors.Is(err, lock.ErrContended):
		outcome = "busy" // given up while live holders had it
	case err != nil:
		outcome = "not_obtained"
	}
	o.m.lockAcquire.WithLabelValues(outcome).Observe(wait.Seconds())
	o.m.lockAttempts.Observe(float64(attempts))
}

func (o lockObserver) QueueDepth(key string, depth int) {
	if depth == 0 {
		o.m.lockWaiters.DeleteLabelValues(key)
		return
	}
	o.m.lockWaiters.WithLabelValues(key).Set(float64(depth))
}

func (o lockObserver) Refreshed(_ string, err error) {
	result := "ok"
	if err != nil {
		result = "failed"
	}
	o.m.lockRenewals.WithLabelValues(result).Inc()
}

func (o lockObserver) LeaseLost(string) { o.m.lockLost.Inc() }
