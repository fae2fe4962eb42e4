package engine

import (
	"context"
	"time"

	"github.com/seckill/seckill/service"
)

// Committer commits batches: the database's side of the order path
// (repository.MySQL, repository.SQLite). It must decrement stock only
// through a conditional UPDATE and report service.ErrConflict when that
// matched no row, so that a retry re-reads.
type Committer interface {
	CommitBatch(ctx context.Context, b service.Batch) (service.BatchResult, error)
	// CommitRound commits batches of distinct SKUs in one transaction
	// whose statements wait at most a second for a row lock, and answers
	// each: its result, or its own error (ErrSKUNotFound, ErrStaleFence,
	// ErrOutcomeUnknown). An error means nothing was committed.
	CommitRound(ctx context.Context, bs []service.Batch) ([]service.RoundResult, error)
	// AdoptFence sets the SKU's fence to to if it is still from, and
	// reports whether it did: the way out of a fence issued by an earlier
	// incarnation of the lock backend (Lease.Horizon).
	AdoptFence(ctx context.Context, id, from, to int64) (bool, error)
}

// SKUs is what the engine asks and tells of this instance's SKUs
// (service.Directory): whether one is known sold out, that a commit sold
// one out, that one is gone from the database.
type SKUs interface {
	SoldOut(skuID int64) bool
	// MarkSoldOut records that the commit of version, begun at (unix
	// nanos), left the SKU without stock.
	MarkSoldOut(skuID, version, at int64)
	Forget(skuID int64)
}

// Replicas confirms that commits reached enough replicas of the primary
// (mysql.min_replicas): a buyer is answered only once they have the
// batch's commit, so that losing the primary's machine loses no
// acknowledged order.
type Replicas interface {
	// Confirm returns nil once enough replicas have c, else, within its
	// own bound (mysql.replica_timeout) or when ctx ends, an error
	// wrapping service.ErrNotReplicated.
	Confirm(ctx context.Context, c service.Commit) error
}

// Locker obtains per-SKU leases. It returns service.ErrLockUnavailable
// (wrapped) when its backend cannot be reached, service.ErrLockBusy
// (wrapped) when the lock was held by live holders until ctx was done,
// and another error when it was held elsewhere, by a holder that showed
// no sign of life, until ctx was done.
type Locker interface {
	// Obtain takes key's lock. When rank is not 0 and the locker Ranks, a
	// free lock goes to the lowest rank waiting (lock.Client.ObtainRanked);
	// otherwise rank is ignored.
	Obtain(ctx context.Context, key string, rank int64) (Lease, error)
	// Ranks reports whether Obtain honours rank: the Redis lock does,
	// ZooKeeper's does not.
	Ranks() bool
}

// Lease is a held lock: what every backend's has. A lease may also be a
// Handoff (the Redis lock's) or a Horizoner (ZooKeeper's): the worker's
// hold (hold.go) asks once, when it obtains the lease.
type Lease interface {
	// Fence is a token strictly greater than any earlier lease's on the
	// same key, or 0 when the backend cannot promise that (Redlock).
	Fence() int64
	// Lost is closed when the lease was found gone while held; nil when
	// nothing watches it.
	Lost() <-chan struct{}
	Release(ctx context.Context) error
}

// Handoff is a lease that hears who else wants its key (the Redis lock,
// lock.Lock): it lets a busy worker hold the lease past LockHold while
// nobody waits, and fair selling hand it to the oldest buyer's instance.
// ZooKeeper's is none: it queues contenders by arrival at the ensemble.
type Handoff interface {
	// Wanting is closed once someone else waits for the key; nil when it
	// cannot tell after all (Redlock, wanted notices off).
	Wanting() <-chan struct{}
	// Keep holds the lease for another LockHold in one round trip when
	// nobody else wants it, and reports whether it is still held; when
	// another holder waits it releases the lease and reports false.
	Keep(ctx context.Context) (bool, error)
	// Contender returns the lowest rank another contender announced while
	// the lease was held; ok is false when none did (lock.Lock.Contender;
	// fair selling).
	Contender() (rank int64, ok bool)
}

// Horizoner is a lease whose backend can say the highest fence it has
// issued so far (ZooKeeper's latest zxid): an ensemble recreated empty
// restarts its fences below those the database still holds, and the
// horizon tells such a foreign fence from a newer holder's. A lease that
// is not a Horizoner cannot tell: any stored fence may be its own.
type Horizoner interface {
	Horizon(ctx context.Context) (int64, error)
}

// Tracer records where a traced order's time went (app/tracing.go fills
// it with OpenTelemetry). With none (Config.Tracer nil) the engine
// measures nothing for tracing: no clock read, no allocation.
type Tracer interface {
	// Order returns the trace of the order whose request ctx carries,
	// nil when it is not recorded (not sampled): then nothing is
	// measured for it either.
	Order(ctx context.Context) OrderTrace
	// Round begins the span of one transaction (a round of the group
	// commit, or a batch committed alone) carrying traced's orders among
	// orders in batches of as many SKUs; each traced order's commit step
	// links to it.
	Round(traced []OrderTrace, batches, orders int, shared bool) Round
}

// OrderTrace is one traced order: its steps are recorded once they are
// over, before its buyer is answered.
type OrderTrace interface {
	Record(s Step)
}

// Round is a transaction's span, begun by Tracer.Round.
type Round interface {
	// End ends the span with the transaction's error, nil when it
	// committed.
	End(err error)
}

// Step is one part of a traced order's time.
type Step struct {
	Kind     StepKind
	From, To time.Time
	// Lease says under what the batch sold (StepLock): LeaseKept,
	// LeaseObtained or LeaseNone.
	Lease string
	// Batch is the size of the order's batch; Rounds the transactions
	// it rode in (StepCommit), the last the one that answered it.
	Batch  int
	Rounds []Round
	Err    error // the step's failure, nil when it succeeded
}

// StepKind names a step of the order path.
type StepKind int

const (
	// StepQueue is from the order's arrival in its SKU's queue to its
	// batch being taken for commit (or its refusal without one).
	StepQueue StepKind = iota
	// StepLock is its batch's turn readying the SKU's lock: kept from
	// the previous batch, obtained (waiting for other holders), or none
	// (the lock store down or the holder stuck: the database's guard).
	StepLock
	// StepCommit is from its batch's first attempt to its result: the
	// transactions it rode in, with their retries.
	StepCommit
	// StepReplicas is the wait for the replicas to confirm the commit
	// (mysql.min_replicas).
	StepReplicas
)

// The leases of StepLock.
const (
	LeaseKept     = "kept"
	LeaseObtained = "obtained"
	LeaseNone     = "none"
)
