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

// WithTTL sets the lease time-to-live. The default is 10s. A lease that is
// neither released nor refreshed expires after ttl, whatever its holder
// believes; values below 1ms are raised to 1ms (Redis PX resolution).
func WithTTL(d time.Duration) Option {
	return func(o *options) { o.ttl = max(d, time.Millisecond) }
}

// WithAttemptTimeout bounds each Redis attempt made by Obtain, Release and
// Refresh (in Redlock mode: each round over all nodes). The default is
// 250ms, far above a healthy round trip (well under 1ms) and short enough
// that two attempts against an unreachable Redis fail fast with
// ErrUnavailable even when the go-redis client retries its dials. An attempt
// that runs out of time counts as Redis (or that node) being unreachable.
// Non-positive values restore the default.
func WithAttemptTimeout(d time.Duration) Option {
	return func(o *options) {
		if d <= 0 {
			d = 250 * time.Millisecond
		}
		o.attemptTO = d
	}
}

// WithPrefix sets the prefix prepended to every key in Redis. The default is
// "lock:". The fence counter lives at prefix+key+":fence". With Redis Cluster,
// put a hash tag in the key ("{sku:1}") so both land in the same slot, and
// keep braces out of the prefix, or every key shares the prefix's slot.
func WithPrefix(p string) Option {
	return func(o *options) { o.prefix = p }
}

// WithRetry sets how Obtain retries while the lock is held by someone else:
// exponential back-off starting at minBackoff, capped at maxBackoff, with full
// jitter (each delay is uniform in [0, cap]), for at most maxAttempts Redis
// attempts. The defaults are 1ms, 64ms and 0; maxAttempts <= 0 means retry
// until the context is done. Non-positive back-offs fall back to the
// defaults, and maxBackoff is raised to minBackoff if smaller.
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

// WithQueueMax bounds how many goroutines of this Client may wait locally for
// the same key while another of its goroutines competes for or holds it. The
// default is 1024. When the queue is full Obtain fails at once with
// ErrQueueFull, without a Redis round trip; n <= 0 means no waiting at all.
func WithQueueMax(n int) Option {
	return func(o *options) { o.queueMax = max(n, 0) }
}

// WithWatchdog turns on automatic lease renewal. The default is off. While a
// Lock is held a goroutine refreshes it every TTL/3 and closes Lock.Lost as
// soon as a renewal finds the lease gone (or cannot reach Redis before the
// lease would have run out), so the holder can abort its critical section.
func WithWatchdog(on bool) Option {
	return func(o *options) { o.watchdog = on }
}

// WithFenceTTL sets the idle expiry of the per-key fence counter, refreshed on
// every successful Obtain. The default is 24h; values below 1ms are raised to
// 1ms. When the counter has expired it is re-seeded from the Redis clock in
// microseconds, so fencing tokens keep increasing (see docs/locking.md).
// It has no effect in Redlock mode, which has no fencing.
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

// WithMinReplicas makes Obtain wait, after the master granted the lease,
// until n replicas acknowledged the write (Redis WAIT), for at most timeout.
// The default is n = 0: no waiting. When fewer acknowledge in time the
// attempt fails with an error wrapping ErrUnavailable and ErrNotReplicated,
// and a failed Obtain releases the lease (best effort). Non-positive timeouts
// become 100ms; each attempt's deadline (WithAttemptTimeout) is extended by
// timeout. It has no effect in Redlock mode.
//
// This narrows the window in which a failover can hand a held lease to a
// second client to writes lost after a replica acknowledged them (WAIT does
// not make Redis strongly consistent: a replica that acknowledged may still
// not be the one promoted). The fence, not WAIT, is what protects the data.
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

// WithWantedNotices makes holders hear at once when someone else wants their
// key (Lock.Wanting): a refused Obtain publishes the key on the channel
// prefix+"wanted", and the Client subscribes to it from its first lease on,
// on a connection of its own until Close. Every Client that competes for
// the same keys should have it. The default is off: Lock.Wanting is then
// nil. An ACL user needs the channel (&prefix+"wanted"); without it the
// publish is skipped and the holders learn that they are wanted only from
// the watchdog's renewals. It has no effect in Redlock mode, which
// publishes nothing.
func WithWantedNotices(on bool) Option {
	return func(o *options) { o.notices = on }
}

// WithOwner names this Client's leases: the name goes into each lease's
// value, before its random token, so that Inspect can say who holds a key
// at no cost to Obtain. The default is "" (unnamed). The name should not be
// a secret; an instance name or host name is what it is for.
func WithOwner(name string) Option {
	return func(o *options) { o.owner = name }
}
