package harness

import (
	"context"
	"fmt"
	"time"

	"github.com/seckill/seckill/internal/config"
	"github.com/seckill/seckill/internal/testenv/eventcheck"
	"github.com/seckill/seckill/internal/testenv/natsserver"
	"github.com/seckill/seckill/loadtest/verify"
	"github.com/seckill/seckill/lock/locktest"
)

// startNATS starts the private nats-server the instances relay their
// order events to (-events).
func (r *run) startNATS(ctx context.Context) error {
	s, err := natsserver.Start(ctx, r.work)
	if s != nil {
		r.stops = append(r.stops, s.Kill)
	}
	if err != nil {
		return fmt.Errorf("-events: %w (-events=false runs without)", err)
	}
	r.nats = s
	r.event("nats-server ready: %s", s.URL)
	return nil
}

const (
	eventsDrained = 2 * time.Minute // the wait for the relay to publish the outbox
	maxBreaches   = 20              // listed; the rest are counted
)

// checkStream waits, bounded, until the relay has published the whole
// outbox, then holds the stream, replayed from its start and
// deduplicated by event id, to it (eventcheck.Stream): nothing without
// -events.
func (r *run) checkStream(ctx context.Context) (*eventcheck.Report, []verify.Violation) {
	if r.nats == nil {
		return nil, nil
	}
	err := r.awaitCount(ctx, "no event unpublished", eventsDrained, func(n int64) bool { return n == 0 },
		"SELECT COUNT(*) FROM order_events WHERE published_at IS NULL")
	var rep eventcheck.Report
	if err == nil {
		rep, err = eventcheck.Stream(ctx, r.db, r.nats.URL, config.Default().Events.Stream, r.orderIDs.Decode)
	}
	if err != nil {
		r.event("events: %v", err)
		return nil, violationsOf(EventsStream, err.Error())
	}
	r.event("events: %d messages in the stream, %d distinct, %d in the outbox; %d breaches", rep.Messages, rep.Distinct, rep.Outbox, len(rep.Breaches))
	var msgs []string
	for _, b := range rep.Breaches[:min(len(rep.Breaches), maxBreaches)] {
		msgs = append(msgs, b.Error())
	}
	if n := len(rep.Breaches) - len(msgs); n > 0 {
		msgs = append(msgs, fmt.Sprintf("%d more breaches", n))
	}
	return &rep, violationsOf(EventsStream, msgs...)
}

// awaitCount polls query, a count, until ok holds of it, within timeout.
func (r *run) awaitCount(ctx context.Context, what string, timeout time.Duration, ok func(int64) bool, query string, args ...any) error {
	return locktest.Poll(ctx, what, timeout, 100*time.Millisecond, func(ctx context.Context) error {
		var n int64
		err := r.db.QueryRowContext(ctx, query, args...).Scan(&n)
		if err == nil && !ok(n) {
			err = fmt.Errorf("%d so far", n)
		}
		return err
	})
}
