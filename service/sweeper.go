package service

import (
	"context"
	"errors"
	"log/slog"
	"time"
)

// SweeperLeaseKey is the lock key of the expiry sweeper's leader lease.
const SweeperLeaseKey = "sweeper:order-expiry"

// SweeperConfig tunes the expiry sweeper; see internal/config for the defaults.
type SweeperConfig struct {
	Interval  time.Duration // how often the leader sweeps and followers try the lease
	Batch     int           // orders expired per transaction
	TxTimeout time.Duration // one sweep transaction
}

// Elector elects the one instance that sweeps. Elect takes key's lock,
// unranked: the first to ask leads. It returns ErrLockUnavailable
// (wrapped) when the lock's backend cannot be reached, another error when
// the lock stayed held until ctx was done.
type Elector interface {
	Elect(ctx context.Context, key string) (Leadership, error)
}

// Leadership is the leader's lease.
type Leadership interface {
	// Fence is a token strictly greater than any earlier leader's, or 0
	// when the backend cannot promise that.
	Fence() int64
	// Lost is closed when the lease was found gone while held; nil when
	// nothing watches it.
	Lost() <-chan struct{}
	Release(ctx context.Context) error
}

// Leading returns ctx, cancelled when lease is found lost, for a
// leader's work, and end, which cancels it and releases the lease
// (within a second; a failed release, logged at debug as what's, leaves
// it to expire).
func Leading(ctx context.Context, lease Leadership, log *slog.Logger, what string) (_ context.Context, end func()) {
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		select {
		case <-lease.Lost():
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, func() {
		cancel()
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer rcancel()
		if err := lease.Release(rctx); err != nil {
			log.Debug(what+" lease release", "err", err)
		}
	}
}

// electWait bounds a follower's wait for the lease, tried once per Interval.
const electWait = 100 * time.Millisecond

// Sweeper expires unpaid orders past their expires_at and returns their
// units. Every instance runs one; a lease on SweeperLeaseKey elects the
// one that sweeps, and its fence makes the database refuse a sweeper whose
// lease was superseded (say, paused and resumed).
type Sweeper struct {
	store LifecycleStore
	elect Elector
	skus  *Directory
	cfg   SweeperConfig
	log   *slog.Logger
	obs   LifecycleObserver
}

// NewSweeper returns the expiry sweeper, elected by elect (nil: it sweeps
// unfenced). Returned units are published through skus as restocks. obs
// may be nil.
func NewSweeper(store LifecycleStore, elect Elector, skus *Directory, cfg SweeperConfig, log *slog.Logger, obs LifecycleObserver) *Sweeper {
	if obs == nil {
		obs = nopLifecycleObserver{}
	}
	return &Sweeper{store: store, elect: elect, skus: skus, cfg: cfg, log: log, obs: obs}
}

// Run sweeps while this instance holds the lease, and tries for the lease
// once per Interval otherwise, until ctx ends.
func (s *Sweeper) Run(ctx context.Context) {
	for {
		lease, err := s.elected(ctx)
		switch {
		case lease != nil:
			s.lead(ctx, lease)
		case errors.Is(err, ErrLockUnavailable):
			// The lock backend is unreachable: sweep unfenced, as orders
			// sell unlocked. The status guard still returns each unit once.
			s.sweepDue(ctx, 0)
		}
		if !sleep(ctx, s.cfg.Interval) {
			return
		}
	}
}

// elected tries for the lease once, briefly: a follower does not queue
// behind the leader.
func (s *Sweeper) elected(ctx context.Context) (Leadership, error) {
	if s.elect == nil {
		return nil, ErrLockUnavailable
	}
	ctx, cancel := context.WithTimeout(ctx, electWait)
	defer cancel()
	return s.elect.Elect(ctx, SweeperLeaseKey)
}

// lead sweeps under lease until it is lost, its fence is refused or ctx
// ends, then releases it. Losing the lease cancels the sweep under way.
func (s *Sweeper) lead(ctx context.Context, lease Leadership) {
	s.obs.SweeperLeader(true)
	defer s.obs.SweeperLeader(false)
	ctx, end := Leading(ctx, lease, s.log, "sweeper")
	defer end()
	for {
		more, err := s.sweepDue(ctx, lease.Fence())
		if errors.Is(err, ErrStaleFence) {
			s.log.Warn("sweeper lease superseded: a newer leader swept; stepping down", "fence", lease.Fence())
			return
		}
		if more && err == nil {
			continue
		}
		if !sleep(ctx, s.cfg.Interval) {
			return
		}
	}
}

// sweepDue runs one sweep transaction and reports whether a full batch
// was expired (more may be due).
func (s *Sweeper) sweepDue(ctx context.Context, fence int64) (more bool, err error) {
	ex, err := s.SweepOnce(ctx, fence)
	if err != nil && ctx.Err() == nil && !errors.Is(err, ErrStaleFence) {
		s.log.Warn("order expiry sweep failed; retrying next interval", "err", err)
	}
	return ex.Orders >= s.cfg.Batch, err
}

// SweepOnce expires up to Batch due orders in one transaction fenced with
// fence and restocks their units (to the waiting orders first), and
// lapses up to Batch waiting orders whose sale ended. It returns ErrStaleFence, having written
// nothing, when a newer lease already swept.
func (s *Sweeper) SweepOnce(ctx context.Context, fence int64) (Expiry, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.TxTimeout)
	defer cancel()
	start := time.Now()
	ex, err := s.store.ExpireDue(ctx, ExpiryRun{Fence: fence, Now: now(), Limit: s.cfg.Batch})
	var lag time.Duration
	if !ex.Oldest.IsZero() {
		lag = start.Sub(ex.Oldest)
	}
	s.obs.Swept(time.Since(start), lag, err)
	if err != nil {
		return Expiry{}, err
	}
	if ex.Orders > 0 {
		s.obs.OrderSettled(OrderExpired, ex.Orders, ex.Units)
	}
	if ex.Lapsed > 0 {
		s.obs.OrderSettled(OrderLapsed, ex.Lapsed, 0)
	}
	for _, sku := range ex.SKUs {
		s.skus.Restocked(ctx, sku)
	}
	s.skus.Changed(ex.Changed...)
	s.skus.Allotted(ctx, ex.Allotted)
	return ex, nil
}

// sleep waits d or until ctx ends; it reports whether ctx is still live.
// The timer of a sleep that ctx ends is collected unfired (Go 1.23 on).
func sleep(ctx context.Context, d time.Duration) bool {
	select {
	case <-time.After(d):
		return true
	case <-ctx.Done():
		return false
	}
}
