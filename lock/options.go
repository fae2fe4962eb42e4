package lock

import "time"

// Option configures a Client. Options are applied in order by New and
// NewRedlock; a later option overrides an earlier one.
type Option func(*options)

type options struct {
	ttl         time.Duration
	attemptTO   time.Duration
	prefix      string
	minBackoff  time.Duration
	maxBackoff  time.Duration
	maxAttempts int
	queueMax    int
	watchdog    bool
	fenceTTL    time.Duration
	observer    Observer
	minReplicas int
	replicaTO   time.Duration // 0 unless minReplicas > 0
	notices     bool
	owner       string
}

func defaultOptions() options {
	return options{
		ttl:        10 * time.Second,
		attemptTO:  250 * time.Millisecond,
		prefix:     "lock:",
		minBackoff: time.Millisecond,
		maxBackoff: 64 * time.Millisecond,
		queueMax:   1024,
		fenceTTL:   24 * time.Hour,
		observer:   NopObserver{},
	}
}

func newOptions(opts []Option) options {
	o := defaultOptions()
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// WithTTL sets the lease time-to-live. The default is 10s; values below 1ms
// (Redis PX resolution) become 1ms. A lease neither released nor refreshed
// expires after ttl, whatever its holder believes.
func WithTTL(d time.Duration) Option {
	return func(o *options) { o.ttl = max(d, time.Millisecond) }
}

// WithAttemptTimeout bounds each Redis attempt of Obtain, Release and
// Refresh (with Redlock, each round over all nodes); an attempt that times
// out counts as unreachable. The default is 250ms, short enough that two
// attempts against a dead Redis fail fast; non-positive values restore it.
func WithAttemptTimeout(d time.Duration) Option {
	return func(o *options) {
		if d <= 0 {
			d = 250 * time.Millisecond
		}
		o.attemptTO = d
	}
}

// WithPrefix sets the prefix of every key in Redis. The default is "lock:".
// The fence counter is prefix+key+":fence". With Redis Cluster, hash-tag the
// key ("{sku:1}") so both share a slot, and keep braces out of the prefix,
// or every key lands in the prefix's slot.
func WithPrefix(p string) Option {
	return func(o *options) { o.prefix = p }
}

// WithRetry sets how Obtain retries while someone else holds the lock:
// back-off doubling from minBackoff up to maxBackoff, with full jitter, for
// at most maxAttempts attempts. The defaults are 1ms, 64ms and 0 (until ctx
// is done); non-positive back-offs restore the defaults.
func WithRetry(minBackoff, maxBackoff time.Duration, maxAttempts int) Option {
	return func(o *options) {
		if minBackoff <= 0 {
			minBackoff = time.Millisecond
		}
		if maxBackoff <= 0 {
			maxBackoff = 64 * time.Millisecond
		}
		o.minBackoff = minBackoff
		o.maxBackoff = max(maxBackoff, minBackoff)
		o.maxAttempts = max(maxAttempts, 0)
	}
}

// WithQueueMax bounds how many goroutines of this Client may wait locally
// for a key held or sought by another. The default is 1024; n <= 0 means no
// waiting. Past it Obtain fails at once with ErrQueueFull.
func WithQueueMax(n int) Option {
	return func(o *options) { o.queueMax = max(n, 0) }
}

// WithWatchdog turns on renewal of held leases every TTL/3. The default is
// off. Lock.Lost closes when a renewal finds the lease gone, or Redis stays
// unreachable until it may have expired, so the holder can abort.
func WithWatchdog(on bool) Option {
	return func(o *options) { o.watchdog = on }
}

// WithFenceTTL sets the idle expiry of each key's fence counter. The default
// is 24h; values below 1ms become 1ms. An expired counter restarts from the
// Redis clock in µs, so fences still increase. No effect with Redlock.
func WithFenceTTL(d time.Duration) Option {
	return func(o *options) { o.fenceTTL = max(d, time.Millisecond) }
}

// WithObserver sets the Observer that receives acquire, queue and lease
// events. The default is NopObserver. A nil Observer restores the default.
func WithObserver(obs Observer) Option {
	return func(o *options) {
		if obs == nil {
			obs = NopObserver{}
		}
		o.observer = obs
	}
}

// WithMinReplicas makes Obtain wait up to timeout (Redis WAIT, added to each
// attempt's deadline) for n replicas to acknowledge the lease. The default is
// n = 0; timeout <= 0 means 100ms. Too few acknowledgements release the lease
// and fail the attempt with ErrNotReplicated. No effect with Redlock.
//
// WAIT narrows the failover window; the fence is what protects the data.
func WithMinReplicas(n int, timeout time.Duration) Option {
	return func(o *options) {
		if timeout <= 0 {
			timeout = 100 * time.Millisecond
		}
		o.minReplicas = max(n, 0)
		o.replicaTO = 0
		if o.minReplicas > 0 {
			o.replicaTO = timeout
		}
	}
}

// WithWantedNotices makes a refused Obtain publish the key on prefix+"wanted",
// which the Client subscribes to until Close, so holders hear at once through
// Lock.Wanting. Give it to every Client sharing the keys. The default is off
// (Wanting is nil). Without the ACL channel permission, holders hear only
// from the watchdog. No effect with Redlock.
func WithWantedNotices(on bool) Option {
	return func(o *options) { o.notices = on }
}

// WithOwner names this Client's leases in their value, so that Inspect can
// say who holds a key at no cost to Obtain. The default is "" (unnamed). Use
// an instance or host name, not a secret.
func WithOwner(name string) Option {
	return func(o *options) { o.owner = name }
}
