package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckill/seckill/events"
)

var _ events.Observer = (*Events)(nil)

// Events publishes the event relay's series: the outbox's backlog and the
// age of its oldest event (as the leader last read them), events
// published, failed rounds and leadership.
type Events struct {
	backlog   prometheus.Gauge
	oldest    prometheus.Gauge
	published prometheus.Counter
	failed    prometheus.Counter
	leader    prometheus.Gauge
}

// NewEvents registers the relay's series in m's registry. Call it once
// per Metrics.
func NewEvents(m *Metrics) (*Events, error) {
	e := &Events{
		backlog:   gauge("seckill_events_backlog", "Order events in the outbox not yet published, as the relay leader last read them."),
		oldest:    gauge("seckill_events_oldest_unpublished_seconds", "Age of the oldest order event not yet published, as the relay leader last read it; 0 when none waits."),
		published: counter("seckill_events_published_total", "Order events the broker acknowledged (republications included)."),
		failed:    counter("seckill_events_publish_failures_total", "Relay rounds that failed (broker or database unreachable); the relay backs off."),
		leader:    gauge("seckill_events_relay_leader", "1 while this instance holds the event relay's leader lease."),
	}
	for _, c := range []prometheus.Collector{e.backlog, e.oldest, e.published, e.failed, e.leader} {
		if err := m.Register(c); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// Published implements events.Observer.
func (e *Events) Published(n int) { e.published.Add(float64(n)) }

// PublishFailed implements events.Observer.
func (e *Events) PublishFailed() { e.failed.Inc() }

// Backlog implements events.Observer.
func (e *Events) Backlog(n int64, oldest time.Duration) {
	e.backlog.Set(float64(n))
	e.oldest.Set(oldest.Seconds())
}

// RelayLeader implements events.Observer.
func (e *Events) RelayLeader(on bool) {
	if on {
		e.leader.Set(1)
	} else {
		e.leader.Set(0)
	}
}
