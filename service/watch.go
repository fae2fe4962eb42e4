package service

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"strconv"
	"sync"
	"time"
)

// Long-polls of orders: a buyer holds a read of an order until it
// differs from the state they have (its Revision), on any instance. The
// instance that commits a change wakes its own polls of those orders and
// publishes their ids on the OrderFeed; every instance wakes its polls of
// the ids it hears, and each re-reads its order from the database, the
// truth. A publish may be lost (Redis down, the publisher dead after its
// COMMIT): every Recheck the held orders are read again in one batched
// read per instance, so a change is heard within Recheck whatever the
// feed does. Held polls are bounded per instance (WatchConfig.Max).

// ErrTooManyPolls refuses a long-poll on an instance that holds
// WatchConfig.Max of them: retry after Retry-After, or read without
// waiting.
var ErrTooManyPolls = errors.New("too many long-polls held")

// errDraining: the instance is shutting down, a poll is answered at once.
var errDraining = errors.New("draining")

// MaxPollWait is the longest wait a long-poll holds (RFC 7240's wait).
const MaxPollWait = 60 * time.Second

// Revision names an order's mutable state: it differs whenever the
// order's status or times do (an order's id, SKU, buyer, quantity and
// creation never change).
func (o Order) Revision() string {
	h := fnv.New64a()
	for _, t := range []*time.Time{o.ExpiresAt, o.SettledAt, o.AllocatedAt} {
		var us int64 = -1
		if t != nil {
			us = t.UnixMicro()
		}
		h.Write(strconv.AppendInt(nil, us, 10))
		h.Write([]byte{'/'})
	}
	return string(o.Status) + "-" + strconv.FormatUint(h.Sum64(), 36)
}

// OrderChange is one message of the feed: orders whose state a commit
// changed, when the committing instance recorded it (its clock), and
// which instance that was.
type OrderChange struct {
	IDs  []int64
	At   time.Time
	From string
}

// OrderFeed carries OrderChanges between instances (Redis pub/sub, see
// locking.RedisFeed). Either may fail or lose messages: the Watch's
// recheck is the fallback.
type OrderFeed interface {
	// Publish sends c to every instance subscribed.
	Publish(ctx context.Context, c OrderChange) error
	// Subscribe calls heard with each change published, until stop; one
	// subscription per call.
	Subscribe(heard func(OrderChange)) (stop func())
}

// OrderStates reads orders by id, all of ids in one read; a missing id
// is left out.
type OrderStates interface {
	Order(ctx context.Context, id int64) (Order, error)
	OrdersByID(ctx context.Context, ids []int64) ([]Order, error)
}

// WatchObserver receives what the long-polls do, for metrics.
type WatchObserver interface {
	// PollsHeld reports the long-polls held now.
	PollsHeld(n int)
	// PollAnswered counts a long-poll answered: by "change", "timeout" or
	// "drain"; heard is how long after the committing instance recorded
	// the change it was answered (0: found by the recheck, not heard).
	PollAnswered(how string, heard time.Duration)
}

type nopWatchObserver struct{}

func (nopWatchObserver) PollsHeld(int)                      {}
func (nopWatchObserver) PollAnswered(string, time.Duration) {}

// WatchConfig bounds the long-polls of an instance; see internal/config.
type WatchConfig struct {
	Max     int           // polls held at once; 0: none (a wait is not applied)
	Recheck time.Duration // each held order is read again this often
}

// pending bounds the ids waiting to be published: past it, they are
// dropped and heard through the recheck.
const (
	pendingMax = 10000
	publishMax = 1000 // ids per message, and per batched read
)

// Watch holds this instance's long-polls of orders. It is safe for
// concurrent use; Start it once, Close it at shutdown.
type Watch struct {
	store OrderStates
	feed  OrderFeed // nil: the recheck alone
	cfg   WatchConfig
	log   *slog.Logger
	obs   WatchObserver
	self  string // this Watch, in the messages it sends: random

	mu       sync.Mutex
	held     map[int64][]*poll
	n        int
	draining bool
	drained  chan struct{} // closed by Drain
	pending  []int64
	since    time.Time // when the oldest pending id was recorded
	kick     chan struct{}

	stop chan struct{}
	done sync.WaitGroup
}

// poll is one held long-poll: its order's revision, and where it is woken.
type poll struct {
	id   int64
	rev  string
	wake chan time.Time // when the change was recorded; zero: by the recheck
}

// NewWatch returns the long-polls of an instance, reading orders from
// store and hearing of changes through feed (nil: the recheck alone).
// obs may be nil.
func NewWatch(store OrderStates, feed OrderFeed, cfg WatchConfig, log *slog.Logger, obs WatchObserver) *Watch {
	if obs == nil {
		obs = nopWatchObserver{}
	}
	var self [8]byte
	_, _ = rand.Read(self[:]) // crypto/rand.Read never fails
	return &Watch{store: store, feed: feed, self: hex.EncodeToString(self[:]), cfg: cfg, log: log, obs: obs,
		held: map[int64][]*poll{}, drained: make(chan struct{}), kick: make(chan struct{}, 1), stop: make(chan struct{})}
}

// Start subscribes to the feed and starts the publisher and the recheck:
// one subscription and two goroutines per instance, however many poll.
func (w *Watch) Start() {
	var unsubscribe func()
	if w.feed != nil {
		unsubscribe = w.feed.Subscribe(w.heard)
	}
	w.done.Add(2)
	go func() {
		defer w.done.Done()
		w.publishLoop()
		if unsubscribe != nil {
			unsubscribe()
		}
	}()
	go func() { defer w.done.Done(); w.recheckLoop() }()
}

// Close drains the polls and stops what Start started; pending ids are
// published first, within a second.
func (w *Watch) Close() error {
	w.Drain()
	close(w.stop)
	w.done.Wait()
	return nil
}

// Drain answers every held poll now and every later one at once: the
// instance is shutting down and its connections must end promptly.
func (w *Watch) Drain() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.draining {
		w.draining = true
		close(w.drained)
	}
}

// Await holds a read of o, the order as the caller has it, for up to
// wait, and returns the order as the database has it once it differs
// (changed), or o (not changed) when wait ran out, the instance drains
// or ctx ends. Past WatchConfig.Max polls it is ErrTooManyPolls.
func (w *Watch) Await(ctx context.Context, o Order, wait time.Duration) (now Order, changed bool, err error) {
	p, err := w.hold(o)
	if errors.Is(err, errDraining) {
		return o, false, nil
	}
	if err != nil {
		return o, false, err
	}
	defer w.release(p)
	t := time.NewTimer(min(wait, MaxPollWait))
	defer t.Stop()
	for {
		select {
		case at := <-p.wake:
			cur, err := w.store.Order(ctx, o.ID)
			if err != nil {
				if ctx.Err() != nil {
					return o, false, nil
				}
				w.log.WarnContext(ctx, "long-poll could not read its order again; the recheck will", "err", err)
				continue
			}
			if cur.Revision() != p.rev {
				var heard time.Duration
				if !at.IsZero() {
					heard = time.Since(at)
				}
				w.obs.PollAnswered("change", heard)
				return cur, true, nil
			}
		case <-t.C:
			w.obs.PollAnswered("timeout", 0)
			return o, false, nil
		case <-w.drained:
			w.obs.PollAnswered("drain", 0)
			return o, false, nil
		case <-ctx.Done(): // the client left: nobody reads the answer
			return o, false, nil
		}
	}
}

// hold registers a poll of o, within the bound.
func (w *Watch) hold(o Order) (*poll, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.draining {
		return nil, errDraining
	}
	if w.n >= w.cfg.Max {
		return nil, fmt.Errorf("%w: %d held (order.long_polls_max)", ErrTooManyPolls, w.n)
	}
	p := &poll{id: o.ID, rev: o.Revision(), wake: make(chan time.Time, 1)}
	w.held[o.ID] = append(w.held[o.ID], p)
	w.n++
	w.obs.PollsHeld(w.n)
	return p, nil
}

func (w *Watch) release(p *poll) {
	w.mu.Lock()
	defer w.mu.Unlock()
	ps := w.held[p.id]
	for i, q := range ps {
		if q == p {
			ps = append(ps[:i], ps[i+1:]...)
			break
		}
	}
	if len(ps) == 0 {
		delete(w.held, p.id)
	} else {
		w.held[p.id] = ps
	}
	w.n--
	w.obs.PollsHeld(w.n)
}

// Held returns the long-polls held now.
func (w *Watch) Held() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.n
}

// Enabled reports whether polls may be held at all (WatchConfig.Max > 0).
func (w *Watch) Enabled() bool { return w != nil && w.cfg.Max > 0 }

// Changed records that a commit through this instance changed the orders
// of ids: its polls of them are woken now, and the ids are published to
// the other instances by the publisher, which never holds the caller up.
func (w *Watch) Changed(ids ...int64) {
	if w == nil || len(ids) == 0 {
		return
	}
	at := time.Now()
	w.mu.Lock()
	w.wakeLocked(ids, at)
	if w.feed != nil {
		if len(w.pending) == 0 {
			w.since = at
		}
		room := max(pendingMax-len(w.pending), 0)
		w.pending = append(w.pending, ids[:min(len(ids), room)]...)
	}
	w.mu.Unlock()
	if w.feed != nil {
		select {
		case w.kick <- struct{}{}:
		default:
		}
	}
}

// wakeLocked wakes the polls of ids; a poll already woken stays woken
// (its read comes after this change). w.mu is held.
func (w *Watch) wakeLocked(ids []int64, at time.Time) {
	for _, id := range ids {
		for _, p := range w.held[id] {
			select {
			case p.wake <- at:
			default:
			}
		}
	}
}

// heard wakes the polls of a change another instance published.
func (w *Watch) heard(c OrderChange) {
	if c.From == w.self {
		return // woken when it was recorded
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.wakeLocked(c.IDs, c.At)
}
