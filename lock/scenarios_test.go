package lock_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/lock"
)

// Each TestNaive_* test first shows a naive locking pattern going wrong
// against a real Redis, then the same scenario with this package.

func TestNaive_SetnxCrashBeforeExpire(t *testing.T) {
	rdb, prefix := sharedRedis(t)
	ctx := context.Background()

	// Naive: SETNX, then the process dies before it sends EXPIRE.
	naive := prefix + "naive"
	if ok := rdb.SetNX(ctx, naive, "me", 0).Val(); !ok {
		t.Fatal("naive SETNX failed")
	}
	// (crash: no EXPIRE, no DEL)
	if ttl := rdb.TTL(ctx, naive).Val(); ttl != -1 {
		t.Fatalf("naive TTL = %v; want -1 (never expires)", ttl)
	}
	t.Logf("naive: SETNX without EXPIRE leaves %s locked forever (TTL -1)", naive)

	// Ours: the TTL is set by the same command that takes the lock.
	c := lock.New(rdb, lock.WithPrefix(prefix), lock.WithTTL(50*time.Millisecond))
	if _, err := c.Obtain(ctx, "ours"); err != nil { // and "crash": never released
		t.Fatal(err)
	}
	if ttl := rdb.PTTL(ctx, prefix+"ours").Val(); ttl <= 0 || ttl > 50*time.Millisecond {
		t.Fatalf("PTTL right after Obtain = %v; want in (0, 50ms]", ttl)
	}
	waitGone(t, rdb, prefix+"ours", time.Second)
	other := lock.New(newShared(t), lock.WithPrefix(prefix))
	l, err := other.Obtain(ctx, "ours")
	if err != nil {
		t.Fatalf("Obtain after the crashed holder's lease expired = %v", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestNaive_PlainDelReleasesOthersLock(t *testing.T) {
	rdb, prefix := sharedRedis(t)
	rdb2 := newShared(t)
	ctx := context.Background()
	const ttl = 30 * time.Millisecond

	// Naive: SET NX PX to lock, plain DEL to unlock.
	naive := prefix + "naive"
	rdb.SetNX(ctx, naive, "A", ttl)
	time.Sleep(2 * ttl) // A is paused past its lease
	if !rdb2.SetNX(ctx, naive, "B", time.Minute).Val() {
		t.Fatal("B could not take the expired naive lock")
	}
	rdb.Del(ctx, naive) // A wakes up and "unlocks"
	if n := rdb.Exists(ctx, naive).Val(); n != 0 {
		t.Fatal("naive DEL did not remove B's key; the scenario is broken")
	}
	t.Log("naive: A's plain DEL removed B's lock; a third client could now enter alongside B")

	// Ours: the release checks the token.
	a, err := lock.New(rdb, lock.WithPrefix(prefix), lock.WithTTL(ttl)).Obtain(ctx, "ours")
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * ttl) // A is paused past its lease
	b, err := lock.New(rdb2, lock.WithPrefix(prefix), lock.WithTTL(time.Minute)).Obtain(ctx, "ours")
	if err != nil {
		t.Fatalf("B: Obtain after A's lease expired = %v", err)
	}
	if err := a.Release(ctx); !errors.Is(err, lock.ErrNotHeld) {
		t.Errorf("A: Release after losing the lease = %v; want ErrNotHeld", err)
	}
	if got := rdb.Get(ctx, prefix+"ours").Val(); got != b.Token() {
		t.Errorf("B's key after A's Release = %q; want B's token %q", got, b.Token())
	}
	if err := b.Release(ctx); err != nil {
		t.Errorf("B: Release = %v; want nil", err)
	}
}

func TestNaive_GetThenDelRace(t *testing.T) {
	rdb, prefix := sharedRedis(t)
	rdb2 := newShared(t)
	ctx := context.Background()

	// Naive: compare on the client (GET), then DEL. Between the two round
	// trips A's lease expires and B takes the lock.
	naive := prefix + "naive"
	rdb.Set(ctx, naive, "A", time.Minute)
	if got := rdb.Get(ctx, naive).Val(); got != "A" { // A: "still mine"
		t.Fatalf("naive GET = %q", got)
	}
	rdb.Del(ctx, naive)                      // A's lease expires (forced)
	rdb2.SetNX(ctx, naive, "B", time.Minute) // B takes the lock
	rdb.Del(ctx, naive)                      // A: DEL, on the strength of the stale GET
	if n := rdb.Exists(ctx, naive).Val(); n != 0 {
		t.Fatal("naive GET-then-DEL kept B's key; the scenario is broken")
	}
	t.Log("naive: A's GET matched, B took over, A's DEL removed B's lock")

	// Ours: compare and delete run in one script, so no command of B can
	// fall between them. The same interleaving (expire, B takes over, A
	// releases) leaves B's lock alone.
	a, err := lock.New(rdb, lock.WithPrefix(prefix), lock.WithTTL(time.Minute)).Obtain(ctx, "ours")
	if err != nil {
		t.Fatal(err)
	}
	rdb.Del(ctx, prefix+"ours") // A's lease expires (forced)
	b, err := lock.New(rdb2, lock.WithPrefix(prefix), lock.WithTTL(time.Minute)).Obtain(ctx, "ours")
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Release(ctx); !errors.Is(err, lock.ErrNotHeld) {
		t.Errorf("A: Release = %v; want ErrNotHeld", err)
	}
	if got := rdb.Get(ctx, prefix+"ours").Val(); got != b.Token() {
		t.Errorf("B's key after A's Release = %q; want B's token", got)
	}
	if err := b.Release(ctx); err != nil {
		t.Error(err)
	}
}

// resource is a toy storage service. With fenced set, it remembers the
// highest fencing token it has seen and rejects writes carrying a lower one,
// as a conditional UPDATE ... WHERE fence < ? does in the database.
type resource struct {
	fenced  bool
	mu      sync.Mutex
	highest int64
	value   string
}

var errStale = errors.New("stale fencing token")

func (r *resource) write(fence int64, v string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fenced && fence < r.highest {
		return errStale
	}
	r.highest = max(r.highest, fence)
	r.value = v
	return nil
}

func TestFencing_StaleHolderRejected(t *testing.T) {
	rdb, prefix := sharedRedis(t)
	ctx := context.Background()
	const ttl = 30 * time.Millisecond
	ca := lock.New(rdb, lock.WithPrefix(prefix), lock.WithTTL(ttl))
	cb := lock.New(newShared(t), lock.WithPrefix(prefix), lock.WithTTL(time.Minute))

	for _, res := range []*resource{{fenced: false}, {fenced: true}} {
		a, err := ca.Obtain(ctx, "res")
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * ttl) // A pauses (GC, swap, slow I/O) past its lease
		b, err := cb.Obtain(ctx, "res")
		if err != nil {
			t.Fatalf("B: Obtain = %v", err)
		}
		if b.Fence() <= a.Fence() {
			t.Fatalf("fences A=%d B=%d; want B > A", a.Fence(), b.Fence())
		}
		if err := res.write(b.Fence(), "B"); err != nil {
			t.Fatalf("B's write = %v", err)
		}
		errA := res.write(a.Fence(), "A") // A wakes up and writes
		switch {
		case !res.fenced && errA == nil:
			t.Logf("naive resource accepted the stale write: value %q (B's write lost)", res.value)
		case !res.fenced:
			t.Errorf("naive resource rejected A: %v", errA)
		case !errors.Is(errA, errStale):
			t.Errorf("fenced resource: A's stale write (fence %d < %d) = %v; want rejected", a.Fence(), b.Fence(), errA)
		}
		if res.fenced && res.value != "B" {
			t.Errorf("fenced resource value = %q; want B's", res.value)
		}
		if err := a.Release(ctx); !errors.Is(err, lock.ErrNotHeld) {
			t.Errorf("A: Release = %v; want ErrNotHeld", err)
		}
		if err := b.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

func TestFencing_SurvivesCounterLoss(t *testing.T) {
	rdb, prefix := sharedRedis(t)
	ctx := context.Background()
	const fenceTTL = 80 * time.Millisecond
	c := lock.New(rdb, lock.WithPrefix(prefix), lock.WithFenceTTL(fenceTTL))
	counter := prefix + "k:fence"

	obtain := func() int64 {
		t.Helper()
		l, err := c.Obtain(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		return l.Fence()
	}

	last := obtain()
	if ttl := rdb.PTTL(ctx, counter).Val(); ttl <= 0 || ttl > fenceTTL {
		t.Errorf("fence counter PTTL = %v; want in (0, %v] (idle expiry)", ttl, fenceTTL)
	}
	if f := obtain(); f <= last {
		t.Errorf("fence = %d; want > %d", f, last)
	} else {
		last = f
	}

	for _, tc := range []struct {
		name string
		lose func()
	}{
		{"deleted", func() { rdb.Del(ctx, counter) }},
		// A promoted replica that missed the last INCRs has an older counter.
		{"rolled back", func() { rdb.DecrBy(ctx, counter, 1000) }},
		{"idle expiry", func() { waitGone(t, rdb, counter, time.Second) }},
	} {
		tc.lose()
		f := obtain()
		if f <= last {
			t.Errorf("%s: fence after losing the counter = %d; want > %d", tc.name, f, last)
		}
		last = f
	}
}

func TestFencing_SurvivesRestartWithoutPersistence(t *testing.T) {
	srv := startRedis(t)
	c := lock.New(srv.client())
	ctx := context.Background()
	var last int64
	for round := range 3 {
		for range 5 {
			l, err := c.Obtain(ctx, "k")
			if err != nil {
				t.Fatalf("round %d: Obtain = %v", round, err)
			}
			if l.Fence() <= last {
				t.Fatalf("round %d: fence %d after %d; want strictly greater", round, l.Fence(), last)
			}
			last = l.Fence()
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
		srv.restart() // every key is gone, counter included
	}
}

// TestWatchdog_KeepsLockPastTTL: a critical section that outlives the lease
// keeps it while the watchdog renews. The section ends on an event (the
// fourth renewal, so more than 4/3 TTL has passed), not after a sleep; a
// one-second TTL leaves each renewal enough slack on a loaded machine.
func TestWatchdog_KeepsLockPastTTL(t *testing.T) {
	rdb, prefix := sharedRedis(t)
	ctx := context.Background()
	const ttl = time.Second
	rec := newRecorder()
	c := lock.New(rdb, lock.WithPrefix(prefix), lock.WithTTL(ttl), lock.WithWatchdog(true), lock.WithObserver(rec))
	l, err := c.Obtain(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	rec.waitRenewals(t, 4, 30*time.Second)

	select {
	case <-l.Lost():
		t.Fatal("Lost() closed while the watchdog should keep the lease")
	default:
	}
	if got := rdb.Get(ctx, prefix+"k").Val(); got != l.Token() {
		t.Fatalf("key after 4 renewals (> TTL) = %q; want our token", got)
	}
	other := lock.New(newShared(t), lock.WithPrefix(prefix), lock.WithRetry(time.Millisecond, time.Millisecond, 3))
	if _, err := other.Obtain(ctx, "k"); !errors.Is(err, lock.ErrNotObtained) {
		t.Errorf("other Client's Obtain = %v; want ErrNotObtained", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Errorf("Release = %v; want nil", err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, err := range rec.refresh {
		if err != nil {
			t.Errorf("renewal failed: %v", err)
		}
	}
}

func TestWatchdog_ReportsLossWithinOnePeriod(t *testing.T) {
	rdb, prefix := sharedRedis(t)
	ctx := context.Background()
	const (
		ttl    = 90 * time.Millisecond
		period = ttl / 3
		slack  = 60 * time.Millisecond
	)
	rec := newRecorder()
	c := lock.New(rdb, lock.WithPrefix(prefix), lock.WithTTL(ttl), lock.WithWatchdog(true), lock.WithObserver(rec))
	l, err := c.Obtain(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	rdb.Del(ctx, prefix+"k") // the lease vanishes behind the holder's back
	start := time.Now()
	select {
	case <-l.Lost():
		t.Logf("Lost() closed %v after the key was deleted (period %v)", time.Since(start), period)
	case <-time.After(period + slack):
		t.Fatalf("Lost() not closed within %v of losing the lease", period+slack)
	}
	if err := l.Release(ctx); !errors.Is(err, lock.ErrNotHeld) {
		t.Errorf("Release after loss = %v; want ErrNotHeld", err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.lost) != 1 {
		t.Errorf("LeaseLost events = %v; want one", rec.lost)
	}
}

func TestWatchdog_LossWhenRedisDies(t *testing.T) {
	srv := startRedis(t)
	const ttl = 90 * time.Millisecond
	c := lock.New(srv.client(), lock.WithTTL(ttl), lock.WithWatchdog(true))
	l, err := c.Obtain(context.Background(), "k")
	if err != nil {
		t.Fatal(err)
	}
	srv.stop()
	select {
	case <-l.Lost():
	case <-time.After(ttl + 100*time.Millisecond):
		t.Fatal("Lost() not closed although no renewal can succeed before the lease runs out")
	}
}

func TestWithoutWatchdog_LostNeverClosed(t *testing.T) {
	rdb, prefix := sharedRedis(t)
	ctx := context.Background()
	l, err := lock.New(rdb, lock.WithPrefix(prefix), lock.WithTTL(20*time.Millisecond)).Obtain(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	waitGone(t, rdb, prefix+"k", time.Second)
	select {
	case <-l.Lost():
		t.Error("Lost() closed without a watchdog")
	default:
	}
	if err := l.Release(ctx); !errors.Is(err, lock.ErrNotHeld) {
		t.Errorf("Release after expiry = %v; want ErrNotHeld", err)
	}
}

// waitGone polls, for at most within, until key no longer exists.
func waitGone(t *testing.T, rdb *redis.Client, key string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for rdb.Exists(context.Background(), key).Val() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%s still exists after %v", key, within)
		}
		time.Sleep(2 * time.Millisecond) // bounded poll
	}
}
