// Package events publishes the order events of the outbox (migrations
// 00006 and 00007, docs/design.md invariant 21) to a broker: one relay at a time,
// elected with a leader lease as the expiry sweeper is, reads the events
// not yet published in id order, publishes them through a Publisher
// (JetStream's is NewJetStream) with each event's id as the broker's
// message id, marks them published under its fence, and deletes them
// after a retention. At least once: a relay that dies between the
// broker's acknowledgement and its mark publishes again, and the broker's
// duplicate window, else the consumer, drops the copy.
package events

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/seckill/seckill/service"
)

// RelayLeaseKey is the lock key of the relay's leader lease.
const RelayLeaseKey = "events:relay"

// Outbox is what the relay reads and writes of the database;
// repository's stores implement it.
type Outbox interface {
	// Unpublished returns the events of whole rows not yet published, in
	// id order (a row's events share its ID), about limit of them.
	Unpublished(ctx context.Context, limit int) ([]service.OrderEvent, error)
	// MarkPublished marks rows published; service.ErrStaleFence when a
	// newer relay's fence wrote.
	MarkPublished(ctx context.Context, ids []int64, fence int64, now time.Time) error
	// PrunePublished deletes up to limit events published before before.
	PrunePublished(ctx context.Context, before time.Time, limit int) (int, error)
	// Backlog counts the unpublished events and dates the oldest.
	Backlog(ctx context.Context) (int64, time.Time, error)
}

// Publisher is the broker's port. Publish sends msgs, none of them of the
// same order, and returns, in their order, nil for each the broker
// acknowledged (stored, or dropped as a duplicate) and the error of each
// it did not; an error of its own means none is known stored.
type Publisher interface {
	Publish(ctx context.Context, msgs []Message) ([]error, error)
}

// Observer hears what the relay does: the metrics implement it.
type Observer interface {
	Published(n int)
	PublishFailed()
	Backlog(n int64, oldest time.Duration)
	RelayLeader(on bool)
}

// Config tunes the relay; see internal/config (events.*) for the defaults.
type Config struct {
	Subject        string        // subject prefix: an event of type t goes to Subject.t
	Batch          int           // events read per round
	Interval       time.Duration // the idle wait, and a follower's between tries for the lease
	MaxBackoff     time.Duration // the longest wait after a failure
	PublishTimeout time.Duration // one round's publications and their acknowledgements
	Retention      time.Duration // published events are deleted this long after
}

// IDs turns an order's id into the one shoppers see: orderid.Codec.
type IDs interface {
	Encode(id int64) string
}

// Relay publishes the outbox. Every instance runs one; the lease elects
// the one that publishes.
type Relay struct {
	outbox Outbox
	pub    Publisher
	elect  service.Elector
	ids    IDs
	cfg    Config
	log    *slog.Logger
	obs    Observer
	// backlogAt is when the backlog was last read (observeBacklog).
	backlogAt time.Time
}

// NewRelay returns a relay of outbox to pub, elected by elect (nil: it
// relays unfenced). obs may be nil.
func NewRelay(outbox Outbox, pub Publisher, elect service.Elector, ids IDs, cfg Config, log *slog.Logger, obs Observer) *Relay {
	if obs == nil {
		obs = nopObserver{}
	}
	return &Relay{outbox: outbox, pub: pub, elect: elect, ids: ids, cfg: cfg, log: log, obs: obs}
}

// electWait bounds a follower's try for the lease.
const electWait = 100 * time.Millisecond

// Run relays while this instance holds the lease, trying for it once per
// Interval otherwise, until ctx ends. Without a reachable lock backend it
// relays unfenced, as the sweeper sweeps: the broker's duplicate window
// drops what two relays both publish.
func (r *Relay) Run(ctx context.Context) {
	for {
		lease, err := r.elected(ctx)
		switch {
		case lease != nil:
			r.lead(ctx, lease)
		case errors.Is(err, service.ErrLockUnavailable):
			r.Round(ctx, 0)
		}
		if !sleep(ctx, r.cfg.Interval) {
			return
		}
	}
}

func (r *Relay) elected(ctx context.Context) (service.Leadership, error) {
	if r.elect == nil {
		return nil, service.ErrLockUnavailable
	}
	ctx, cancel := context.WithTimeout(ctx, electWait)
	defer cancel()
	return r.elect.Elect(ctx, RelayLeaseKey)
}

// lead relays under lease until it is lost, its fence is refused or ctx
// ends, backing off (doubling up to MaxBackoff) while rounds fail.
func (r *Relay) lead(ctx context.Context, lease service.Leadership) {
	r.obs.RelayLeader(true)
	defer r.obs.RelayLeader(false)
	ctx, end := service.Leading(ctx, lease, r.log, "event relay")
	defer end()
	wait := r.cfg.Interval
	for {
		more, err := r.Round(ctx, lease.Fence())
		switch {
		case errors.Is(err, service.ErrStaleFence):
			r.log.Warn("event relay lease superseded; stepping down", "fence", lease.Fence())
			return
		case err != nil:
			wait = min(2*wait, r.cfg.MaxBackoff)
		case more:
			wait = r.cfg.Interval
			continue
		default:
			wait = r.cfg.Interval
		}
		if !sleep(ctx, wait) {
			return
		}
	}
}

// Round publishes one batch of the outbox under fence, prunes as many
// published events past the retention, and reports whether a full batch
// was read (more may wait).
func (r *Relay) Round(ctx context.Context, fence int64) (more bool, err error) {
	defer func() {
		if err != nil && ctx.Err() == nil && !errors.Is(err, service.ErrStaleFence) {
			r.obs.PublishFailed()
			r.log.Warn("event relay round failed; backing off", "err", err)
		}
		r.observeBacklog(ctx, more)
	}()
	evs, err := r.outbox.Unpublished(ctx, r.cfg.Batch)
	if err != nil {
		return false, err
	}
	// A row (a run of a batch's new orders) is marked once all its
	// events are acknowledged, which may take several windows.
	left := make(map[int64]int, len(evs))
	for _, e := range evs {
		left[e.ID]++
	}
	for rest := evs; len(rest) > 0; {
		var w []service.OrderEvent
		w, rest = window(rest)
		if err := r.publish(ctx, w, fence, left); err != nil {
			return false, err
		}
	}
	if _, err := r.outbox.PrunePublished(ctx, now().Add(-r.cfg.Retention), r.cfg.Batch); err != nil {
		return false, err
	}
	return len(evs) >= r.cfg.Batch, nil
}

// window cuts evs before the first event of an order already in it: one
// event per order in flight at a time, so that a failed publication is
// published again before any later event of its order.
func window(evs []service.OrderEvent) (w, rest []service.OrderEvent) {
	seen := make(map[int64]bool, len(evs))
	for i, e := range evs {
		if seen[e.OrderID] {
			return evs[:i], evs[i:]
		}
		seen[e.OrderID] = true
	}
	return evs, nil
}

// publish publishes w and marks the rows whose events the broker has now
// all acknowledged (left counts each row's events not yet acknowledged);
// any event it did not acknowledge is an error, and the round ends there.
func (r *Relay) publish(ctx context.Context, w []service.OrderEvent, fence int64, left map[int64]int) error {
	msgs := make([]Message, len(w))
	for i, e := range w {
		msgs[i] = NewMessage(r.cfg.Subject, e, r.ids)
	}
	pctx, cancel := context.WithTimeout(ctx, r.cfg.PublishTimeout)
	errs, err := r.pub.Publish(pctx, msgs)
	cancel()
	if err != nil {
		return err
	}
	var rows []int64
	acked := 0
	var failed error
	for i, e := range w {
		if errs[i] != nil {
			failed = cmp.Or(failed, errs[i])
			continue
		}
		acked++
		if left[e.ID]--; left[e.ID] == 0 {
			rows = append(rows, e.ID)
		}
	}
	if err := r.outbox.MarkPublished(ctx, rows, fence, now()); err != nil {
		return err
	}
	r.obs.Published(acked)
	return failed
}

// backlogEvery is how often a relay that is behind reads its backlog: the
// read counts every unpublished event, so once a round would make a long
// backlog quadratic.
const backlogEvery = time.Second

// observeBacklog tells the observer the backlog after a round: after every
// round that drained the outbox (more is false), and at most once per
// backlogEvery while rounds find it full.
func (r *Relay) observeBacklog(ctx context.Context, more bool) {
	if ctx.Err() != nil || more && time.Since(r.backlogAt) < backlogEvery {
		return
	}
	r.backlogAt = time.Now()
	n, oldest, err := r.outbox.Backlog(ctx)
	if err != nil {
		r.log.Debug("event backlog read", "err", err)
		return
	}
	var age time.Duration
	if n > 0 {
		age = max(0, now().Sub(oldest))
	}
	r.obs.Backlog(n, age)
}

// now is the relay's clock: UTC, as the database's columns are.
func now() time.Time { return time.Now().UTC() }

// sleep waits d or until ctx ends, and reports whether ctx is still live.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

type nopObserver struct{}

func (nopObserver) Published(int)                {}
func (nopObserver) PublishFailed()               {}
func (nopObserver) Backlog(int64, time.Duration) {}
func (nopObserver) RelayLeader(bool)             {}
