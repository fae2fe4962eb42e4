package metrics

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckill/seckill/service"
)

var _ service.LifecycleObserver = (*Lifecycle)(nil)

// Lifecycle publishes the order lifecycle's series: orders leaving
// pending by status, units returned to stock, the sweeper's transactions
// (duration, lag behind expires_at) and its leadership.
type Lifecycle struct {
	settled  *prometheus.CounterVec
	returned *prometheus.CounterVec
	sweep    *prometheus.HistogramVec
	lag      prometheus.Gauge
	leader   prometheus.Gauge
}

// NewLifecycle registers the lifecycle's series in m's registry. Call it
// once per Metrics.
func NewLifecycle(m *Metrics) (*Lifecycle, error) {
	l := &Lifecycle{
		settled:  counterVec("seckill_orders_settled_total", "Orders that left pending, by status (paid, cancelled, expired). Orders created are seckill_orders_total{result=\"created\"}.", "status"),
		returned: counterVec("seckill_units_returned_total", "Units returned to stock by orders that left pending unpaid, by status (cancelled, expired).", "status"),
		sweep:    histogramVec("seckill_sweep_seconds", "Duration of one expiry sweep transaction, by outcome (ok, stale_fence, error).", []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}, "outcome"),
		lag:      gauge("seckill_sweep_lag_seconds", "How long after its expires_at the oldest order of the last sweep that expired any was expired."),
		leader:   gauge("seckill_sweeper_leader", "1 while this instance holds the expiry sweeper's leader lease."),
	}
	for _, c := range []prometheus.Collector{l.settled, l.returned, l.sweep, l.lag, l.leader} {
		if err := m.Register(c); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// OrderSettled implements service.LifecycleObserver.
func (l *Lifecycle) OrderSettled(status service.OrderStatus, orders int, units int64) {
	l.settled.WithLabelValues(string(status)).Add(float64(orders))
	if units > 0 {
		l.returned.WithLabelValues(string(status)).Add(float64(units))
	}
}

// Swept implements service.LifecycleObserver.
func (l *Lifecycle) Swept(took, lag time.Duration, err error) {
	outcome := "ok"
	switch {
	case errors.Is(err, service.ErrStaleFence):
		outcome = "stale_fence"
	case err != nil:
		outcome = "error"
	}
	l.sweep.WithLabelValues(outcome).Observe(took.Seconds())
	if err == nil && lag > 0 {
		l.lag.Set(lag.Seconds())
	}
}

// SweeperLeader implements service.LifecycleObserver.
func (l *Lifecycle) SweeperLeader(on bool) {
	if on {
		l.leader.Set(1)
	} else {
		l.leader.Set(0)
	}
}
