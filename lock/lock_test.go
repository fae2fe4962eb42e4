package lock_test

import (
	"context"
	"encoding/base32"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/lock"
)

func TestObtain_ReleaseRoundTrip(t *testing.T) {
	rdb, prefix := sharedRedis(t)
	c := lock.New(rdb, lock.WithPrefix(prefix), lock.WithTTL(time.Second))
	ctx := context.Background()

	l, err := c.Obtain(ctx, "k")
	if err != nil {
		t.Fatalf("Obtain(k) = %v; want nil", err)
	}
	if l.Key() != "k" {
		t.Errorf("Key() = %q; want %q", l.Key(), "k")
	}
	if got, err := rdb.Get(ctx, prefix+"k").Result(); err != nil || got != l.Token() {
		t.Errorf("GET %sk = %q, %v; want the token %q", prefix, got, err, l.Token())
	}
	if ttl := rdb.PTTL(ctx, prefix+"k").Val(); ttl <= 0 || ttl > time.Second {
		t.Errorf("PTTL = %v; want in (0, 1s]", ttl)
	}
	if l.Fence() <= 0 {
		t.Errorf("Fence() = %d; want > 0", l.Fence())
	}
	if err := l.Release(ctx); err != nil {
		t.Fatalf("Release = %v; want nil", err)
	}
	if n := rdb.Exists(ctx, prefix+"k").Val(); n != 0 {
		t.Errorf("EXISTS after Release = %d; want 0", n)
	}
	if err := l.Release(ctx); !errors.Is(err, lock.ErrNotHeld) {
		t.Errorf("second Release = %v; want ErrNotHeld", err)
	}
	if err := l.Refresh(ctx, time.Second); !errors.Is(err, lock.ErrNotHeld) {
		t.Errorf("Refresh after Release = %v; want ErrNotHeld", err)
	}
}

func TestToken_RandomAndLongEnough(t *testing.T) {
	rdb, prefix := sharedRedis(t)
	c := lock.New(rdb, lock.WithPrefix(prefix))
	ctx := context.Background()
	seen := map[string]bool{}
	for i := range 50 {
		l, err := c.Obtain(ctx, "k")
		if err != nil {
			t.Fatalf("Obtain #%d = %v", i, err)
		}
		tok := l.Token()
		raw, err := base32.StdEncoding.WithPadding(base32.NoPadding).DecodeString(tok)
		if err != nil || len(tok)*5 < 128 {
			t.Fatalf("Token() = %q (%d bits, %v); want >= 128 random bits", tok, len(tok)*5, err)
		}
		_ = raw
		if seen[tok] {
			t.Fatalf("Token() = %q repeated", tok)
		}
		seen[tok] = true
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// TestObtain_MutualExclusion runs 5,000 acquisitions of one key from 220
// goroutines spread over three Clients with their own connections (three
// "processes", each with its own local queue) and checks that the critical
// section never runs twice at once.
func TestObtain_MutualExclusion(t *testing.T) {
	_, prefix := sharedRedis(t)
	type proc struct {
		goroutines, each int
	}
	procs := []proc{{200, 20}, {10, 50}, {10, 50}} // 4000 + 500 + 500
	const total = 5000

	var (
		inside, maxInside, done atomic.Int64
		fences                  sync.Map
		start                   = make(chan struct{})
		wg                      sync.WaitGroup
		errs                    = make(chan error, total)
	)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	for _, p := range procs {
		c := lock.New(newShared(t), lock.WithPrefix(prefix), lock.WithTTL(5*time.Second))
		for range p.goroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				for range p.each {
					l, err := c.Obtain(ctx, "hot")
					if err != nil {
						errs <- err
						return
					}
					n := inside.Add(1)
					for m := maxInside.Load(); n > m && !maxInside.CompareAndSwap(m, n); m = maxInside.Load() {
					}
					if _, dup := fences.LoadOrStore(l.Fence(), true); dup {
						errs <- errors.New("fence issued twice")
					}
					done.Add(1)
					inside.Add(-1)
					if err := l.Release(ctx); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("acquisition failed: %v", err)
	}
	if got := maxInside.Load(); got != 1 {
		t.Errorf("max goroutines inside the critical section = %d; want 1", got)
	}
	if got := done.Load(); got != total {
		t.Errorf("acquisitions = %d; want %d", got, total)
	}
}

// TestObtain_LocalQueueFIFO checks that local waiters are served in arrival
// order and that only one goroutine of a Client competes in Redis.
func TestObtain_LocalQueueFIFO(t *testing.T) {
	rdb, prefix := sharedRedis(t)
	ctx := context.Background()
	other := lock.New(newShared(t), lock.WithPrefix(prefix))
	held, err := other.Obtain(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}

	mine := newShared(t)
	cnt := countCommands(mine)
	rec := newRecorder()
	c := lock.New(mine, lock.WithPrefix(prefix), lock.WithObserver(rec),
		lock.WithRetry(time.Millisecond, 4*time.Millisecond, 0))
	const n = 8
	order := make(chan int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := c.Obtain(ctx, "k")
			if err != nil {
				t.Errorf("waiter %d: Obtain = %v", i, err)
				return
			}
			order <- i
			if err := l.Release(ctx); err != nil {
				t.Errorf("waiter %d: Release = %v", i, err)
			}
		}()
		// Goroutine 0 competes in Redis; 1..i wait locally.
		if i == 0 {
			cnt.waitAtLeast(t, 1)
		}
		rec.waitDepth(t, "k", i)
	}
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(order)
	want := 0
	for got := range order {
		if got != want {
			t.Errorf("served waiter %d; want %d (FIFO)", got, want)
		}
		want++
	}
	if m := cnt.maxEval.Load(); m != 1 {
		t.Errorf("max lock scripts in flight from one Client = %d; want 1", m)
	}
	_ = rdb
}

func TestObtain_QueueFullWithoutRoundTrip(t *testing.T) {
	rdb, prefix := sharedRedis(t)
	ctx := context.Background()
	holder := lock.New(rdb, lock.WithPrefix(prefix))
	held, err := holder.Obtain(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release(ctx)

	mine := newShared(t)
	cnt := countCommands(mine)
	rec := newRecorder()
	const queueMax = 3
	c := lock.New(mine, lock.WithPrefix(prefix), lock.WithQueueMax(queueMax), lock.WithObserver(rec))
	wctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for i := range queueMax + 1 { // one competing in Redis, queueMax waiting
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := c.Obtain(wctx, "k")
			if !errors.Is(err, context.Canceled) {
				t.Errorf("queued Obtain = %v; want context.Canceled", err)
			}
		}()
		rec.waitDepth(t, "k", i)
	}

	// Only this Obtain's own round trips count: the one competing in
	// Redis keeps retrying meanwhile.
	_, err = c.Obtain(counted(ctx), "k")
	if !errors.Is(err, lock.ErrQueueFull) {
		t.Errorf("Obtain with %d waiters = %v; want ErrQueueFull", queueMax, err)
	}
	if d := cnt.marked.Load(); d != 0 {
		t.Errorf("Redis commands for the refused Obtain = %d; want 0", d)
	}
	// Another key is not affected by this key's queue; its round trip is
	// counted, as the refused Obtain's would have been.
	l, err := c.Obtain(counted(ctx), "other")
	if err != nil {
		t.Errorf("Obtain(other) = %v; want nil", err)
	} else if err := l.Release(ctx); err != nil {
		t.Error(err)
	}
	if cnt.marked.Load() == 0 {
		t.Error("no round trip counted for Obtain(other): the count cannot see the refused Obtain's either")
	}
	cancel()
	wg.Wait()
	rec.waitDepth(t, "k", 0)

	// The slot is free again once the waiters left.
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	l, err = c.Obtain(ctx, "k")
	if err != nil {
		t.Fatalf("Obtain after the queue drained = %v", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestObtain_SlotPassesOnFailure checks that a waiter gets its turn when the
// goroutine ahead of it gives up, and that the slot is free afterwards.
func TestObtain_SlotPassesOnFailure(t *testing.T) {
	rdb, prefix := sharedRedis(t)
	ctx := context.Background()
	held, err := lock.New(rdb, lock.WithPrefix(prefix)).Obtain(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	rec := newRecorder()
	mine := newShared(t)
	cnt := countCommands(mine)
	c := lock.New(mine, lock.WithPrefix(prefix), lock.WithObserver(rec),
		lock.WithRetry(time.Millisecond, 2*time.Millisecond, 0))

	firstCtx, cancelFirst := context.WithCancel(ctx)
	first := make(chan error, 1)
	go func() {
		_, err := c.Obtain(firstCtx, "k")
		first <- err
	}()
	cnt.waitAtLeast(t, 1) // first is competing in Redis
	second := make(chan error, 1)
	go func() {
		sctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		defer cancel()
		_, err := c.Obtain(sctx, "k")
		second <- err
	}()
	rec.waitDepth(t, "k", 1)
	cancelFirst()
	if err := <-first; !errors.Is(err, context.Canceled) || !errors.Is(err, lock.ErrNotObtained) {
		t.Errorf("first Obtain = %v; want ErrNotObtained and context.Canceled", err)
	}
	if err := <-second; !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, lock.ErrNotObtained) {
		t.Errorf("second Obtain = %v; want ErrNotObtained and context.DeadlineExceeded", err)
	}
	rec.mu.Lock()
	attempts := append([]int(nil), rec.attempts...)
	rec.mu.Unlock()
	if len(attempts) != 2 || attempts[1] == 0 {
		t.Errorf("observed attempts = %v; want the second waiter to reach Redis", attempts)
	}
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	l, err := c.Obtain(ctx, "k")
	if err != nil {
		t.Fatalf("Obtain after both failed = %v; want nil (slot freed)", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestObtain_BackoffRespectsDeadline: a context that ends during a back-off
// ends Obtain then, not when the back-off would have. The back-off is up to
// an hour and the context ends once the first attempt was seen, so the
// bound is an event (the cancel), not a wall-clock measure.
func TestObtain_BackoffRespectsDeadline(t *testing.T) {
	rdb, prefix := sharedRedis(t)
	ctx := context.Background()
	held, err := lock.New(rdb, lock.WithPrefix(prefix)).Obtain(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release(ctx)

	other := newShared(t)
	seen := countCommands(other)
	rec := newRecorder()
	c := lock.New(other, lock.WithPrefix(prefix), lock.WithObserver(rec),
		lock.WithRetry(time.Hour, time.Hour, 0))
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := c.Obtain(cctx, "k")
		done <- err
	}()
	seen.waitAtLeast(t, 1)
	cancel()
	select {
	case err = <-done:
	case <-time.After(30 * time.Second): // failure detector only: the back-off would be up to 1h
		t.Fatal("Obtain still sleeping 30s after its context ended")
	}
	if !errors.Is(err, context.Canceled) || !errors.Is(err, lock.ErrNotObtained) {
		t.Errorf("Obtain(held, cancelled in back-off) = %v; want ErrNotObtained and context.Canceled", err)
	}
	if errors.Is(err, lock.ErrUnavailable) {
		t.Errorf("Obtain(held) = %v; contention must not be ErrUnavailable", err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.attempts) != 1 || rec.attempts[0] != 1 {
		t.Errorf("observed attempts = %v; want [1] (no attempt after the context ended)", rec.attempts)
	}
}

// TestObtain_MinReplicasWithoutReplicas: a master with no replica can never
// acknowledge, so the lease is not obtained and is left free for others.
func TestObtain_MinReplicasWithoutReplicas(t *testing.T) {
	rdb, prefix := sharedRedis(t)
	ctx := context.Background()
	if n := rdb.Wait(ctx, 1, time.Millisecond).Val(); n != 0 {
		t.Skipf("shared Redis has %d replicas; this test needs none", n)
	}
	c := lock.New(rdb, lock.WithPrefix(prefix), lock.WithMinReplicas(1, 20*time.Millisecond))
	_, err := c.Obtain(ctx, "k")
	if !errors.Is(err, lock.ErrNotReplicated) || !errors.Is(err, lock.ErrUnavailable) {
		t.Fatalf("Obtain(min_replicas 1, no replica) = %v; want ErrUnavailable and ErrNotReplicated", err)
	}
	if n := rdb.Exists(ctx, prefix+"k").Val(); n != 0 {
		t.Errorf("lease key exists after a failed Obtain; want it released")
	}
	other := lock.New(newShared(t), lock.WithPrefix(prefix), lock.WithRetry(time.Millisecond, time.Millisecond, 1))
	l, err := other.Obtain(ctx, "k")
	if err != nil {
		t.Fatalf("second client, one attempt: Obtain = %v; want the key free", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestObtain_MaxAttempts(t *testing.T) {
	rdb, prefix := sharedRedis(t)
	ctx := context.Background()
	held, err := lock.New(rdb, lock.WithPrefix(prefix)).Obtain(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release(ctx)

	rec := newRecorder()
	c := lock.New(newShared(t), lock.WithPrefix(prefix), lock.WithObserver(rec),
		lock.WithRetry(time.Millisecond, 2*time.Millisecond, 4))
	if _, err := c.Obtain(ctx, "k"); !errors.Is(err, lock.ErrNotObtained) {
		t.Fatalf("Obtain = %v; want ErrNotObtained", err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.attempts) != 1 || rec.attempts[0] != 4 {
		t.Errorf("observed attempts = %v; want [4]", rec.attempts)
	}
}

func TestObtain_Unavailable(t *testing.T) {
	srv := startRedis(t)
	rdb := srv.client()
	rec := newRecorder()
	c := lock.New(rdb, lock.WithObserver(rec))
	ctx := context.Background()

	// Contention on a live server is never ErrUnavailable.
	held, err := lock.New(srv.client()).Obtain(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	_, err = c.Obtain(cctx, "k")
	cancel()
	if !errors.Is(err, lock.ErrNotObtained) || errors.Is(err, lock.ErrUnavailable) {
		t.Errorf("Obtain(held) = %v; want ErrNotObtained, not ErrUnavailable", err)
	}

	srv.stop()
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	start := time.Now()
	_, err = c.Obtain(dctx, "k")
	elapsed := time.Since(start)
	if !errors.Is(err, lock.ErrUnavailable) || errors.Is(err, lock.ErrNotObtained) {
		t.Errorf("Obtain(server down) = %v; want ErrUnavailable only", err)
	}
	if err != nil && !strings.Contains(err.Error(), "redis") {
		t.Errorf("Obtain(server down) = %q; want it to name redis", err)
	}
	if elapsed > 3*time.Second {
		t.Errorf("Obtain(server down) took %v; want fail fast, far inside the 10s deadline", elapsed)
	}
	t.Logf("server down: %v after %v", err, elapsed)
	rec.mu.Lock()
	if n := len(rec.attempts); n == 0 || rec.attempts[n-1] > 2 {
		t.Errorf("observed attempts = %v; want at most 2 for a dead server", rec.attempts)
	}
	rec.mu.Unlock()
	if err := held.Release(ctx); !errors.Is(err, lock.ErrUnavailable) {
		t.Errorf("Release(server down) = %v; want ErrUnavailable", err)
	}

	// Back to normal once Redis returns.
	srv.start()
	l, err := c.Obtain(ctx, "k")
	if err != nil {
		t.Fatalf("Obtain after restart = %v", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestObtain_CancelledBeforeStart(t *testing.T) {
	rdb, prefix := sharedRedis(t)
	c := lock.New(rdb, lock.WithPrefix(prefix))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Obtain(ctx, "k"); !errors.Is(err, context.Canceled) || !errors.Is(err, lock.ErrNotObtained) {
		t.Errorf("Obtain(cancelled ctx) = %v; want ErrNotObtained and context.Canceled", err)
	}
}

func TestRefresh_ExtendsAndDetectsLoss(t *testing.T) {
	rdb, prefix := sharedRedis(t)
	rec := newRecorder()
	c := lock.New(rdb, lock.WithPrefix(prefix), lock.WithTTL(time.Second), lock.WithObserver(rec))
	ctx := context.Background()
	l, err := c.Obtain(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Refresh(ctx, time.Minute); err != nil {
		t.Fatalf("Refresh = %v", err)
	}
	if ttl := rdb.PTTL(ctx, prefix+"k").Val(); ttl <= time.Second {
		t.Errorf("PTTL after Refresh(1m) = %v; want > 1s", ttl)
	}
	rdb.Set(ctx, prefix+"k", "someone-else", time.Minute)
	if err := l.Refresh(ctx, time.Minute); !errors.Is(err, lock.ErrNotHeld) {
		t.Errorf("Refresh of a lost lease = %v; want ErrNotHeld", err)
	}
	if got := rdb.Get(ctx, prefix+"k").Val(); got != "someone-else" {
		t.Errorf("other holder's value = %q; want untouched", got)
	}
	if err := l.Release(ctx); !errors.Is(err, lock.ErrNotHeld) {
		t.Errorf("Release of a lost lease = %v; want ErrNotHeld", err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.refresh) != 2 || rec.refresh[0] != nil || !errors.Is(rec.refresh[1], lock.ErrNotHeld) {
		t.Errorf("observed refreshes = %v; want [nil ErrNotHeld]", rec.refresh)
	}
}

// TestKeep_ExtendsUnlessWanted: a holder keeps its lease, and its fence,
// while nobody else asks for the key; once another Client was refused it,
// or a goroutine of its own Client waits for it, Keep lets it go to them.
func TestKeep_ExtendsUnlessWanted(t *testing.T) {
	rdb, prefix := sharedRedis(t)
	ctx := context.Background()
	ttl := 10 * time.Second
	rec := newRecorder()
	holder := lock.New(rdb, lock.WithPrefix(prefix), lock.WithTTL(ttl), lock.WithObserver(rec))
	other := lock.New(newShared(t), lock.WithPrefix(prefix), lock.WithTTL(ttl), lock.WithRetry(time.Millisecond, 20*time.Millisecond, 1))

	l, err := holder.Obtain(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if err := rdb.PExpire(ctx, prefix+"k", time.Second).Err(); err != nil {
		t.Fatal(err)
	}
	if kept, err := l.Keep(ctx); !kept || err != nil {
		t.Fatalf("Keep with nobody waiting = %v, %v; want true, nil", kept, err)
	}
	if pttl := rdb.PTTL(ctx, prefix+"k").Val(); pttl <= time.Second {
		t.Errorf("PTTL after Keep = %v; want it extended to the TTL (%v)", pttl, ttl)
	}
	if got := rdb.Get(ctx, prefix+"k").Val(); got != l.Token() {
		t.Errorf("the key holds %q after Keep; want the holder's token", got)
	}

	// Another Client is refused: the key is wanted, and Keep lets it go.
	if _, err := other.Obtain(ctx, "k"); !errors.Is(err, lock.ErrNotObtained) {
		t.Fatalf("Obtain while held = %v; want ErrNotObtained", err)
	}
	if kept, err := l.Keep(ctx); kept || err != nil {
		t.Fatalf("Keep while wanted = %v, %v; want false, nil", kept, err)
	}
	if !l.Wanted() {
		t.Error("Wanted() = false after Keep let the lease go to a waiter; want true")
	}
	if n := rdb.Exists(ctx, prefix+"k", prefix+"k:wanted").Val(); n != 0 {
		t.Errorf("%d of the lease and its wanted mark left; want both deleted", n)
	}
	next, err := other.Obtain(ctx, "k")
	if err != nil {
		t.Fatalf("the waiter's Obtain after Keep let go = %v; want the lease", err)
	}
	if next.Fence() <= l.Fence() {
		t.Errorf("the waiter's fence %d; want greater than the let-go lease's %d", next.Fence(), l.Fence())
	}
	if kept, err := l.Keep(ctx); kept || !errors.Is(err, lock.ErrNotHeld) {
		t.Errorf("Keep after letting go = %v, %v; want false, ErrNotHeld", kept, err)
	}
	if err := next.Release(ctx); err != nil {
		t.Fatal(err)
	}

	// A goroutine of the holder's own Client waits: Keep hands it the key.
	l, err = holder.Obtain(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	done := obtainAndRelease(holder, "k")
	rec.waitDepth(t, "k", 1)
	if kept, err := l.Keep(ctx); kept || err != nil {
		t.Fatalf("Keep with a local waiter = %v, %v; want false, nil", kept, err)
	}
	if err := <-done; err != nil {
		t.Errorf("the local waiter's Obtain and Release = %v; want nil", err)
	}

	// A lease that expired is not kept.
	l, err = holder.Obtain(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	rdb.Del(ctx, prefix+"k")
	if kept, err := l.Keep(ctx); kept || !errors.Is(err, lock.ErrNotHeld) {
		t.Errorf("Keep of an expired lease = %v, %v; want false, ErrNotHeld", kept, err)
	}
	if l, err := holder.Obtain(ctx, "k"); err != nil {
		t.Errorf("Obtain after an expired lease was not kept = %v; want the lease (the local slot freed)", err)
	} else if err := l.Release(ctx); err != nil {
		t.Error(err)
	}
}

// TestWanting_ClosedWhenSomeoneElseWantsTheKey: a holder hears that its key
// is wanted when another Client is refused it (through the wanted notices,
// and, with the subscription gone, at the watchdog's next renewal) and when
// a goroutine of its own Client starts waiting for it.
func TestWanting_ClosedWhenSomeoneElseWantsTheKey(t *testing.T) {
	rdb, prefix := sharedRedis(t)
	ctx := context.Background()
	refuse := func(t *testing.T) {
		t.Helper()
		// The refused attempt's wanted mark lives twice the back-off cap: 1s.
		other := lock.New(newShared(t), lock.WithPrefix(prefix), lock.WithWantedNotices(true), lock.WithRetry(time.Millisecond, 500*time.Millisecond, 1))
		defer other.Close()
		if _, err := other.Obtain(ctx, "k"); !errors.Is(err, lock.ErrNotObtained) {
			t.Fatalf("another Client's Obtain = %v; want ErrNotObtained", err)
		}
	}
	wanted := func(t *testing.T, l *lock.Lock, want bool) {
		t.Helper()
		if !want {
			select {
			case <-l.Wanting():
				t.Fatal("Wanting() closed while nobody else asked for the key")
			default:
			}
			return
		}
		select {
		case <-l.Wanting():
		case <-time.After(10 * time.Second):
			t.Fatal("Wanting() not closed 10s after someone else asked for the key")
		}
	}

	t.Run("notice", func(t *testing.T) {
		c := lock.New(rdb, lock.WithPrefix(prefix), lock.WithWantedNotices(true), lock.WithWatchdog(false))
		defer c.Close()
		l, err := c.Obtain(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Release(ctx)
		if l.Wanting() == nil {
			t.Fatal("Wanting() = nil with wanted notices; want a channel")
		}
		wanted(t, l, false)
		refuse(t)
		wanted(t, l, true) // no watchdog: only the notice can have told it
	})

	t.Run("watchdog", func(t *testing.T) {
		c := lock.New(rdb, lock.WithPrefix(prefix), lock.WithWantedNotices(true), lock.WithWatchdog(true), lock.WithTTL(300*time.Millisecond))
		l, err := c.Obtain(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Release(ctx)
		if err := c.Close(); err != nil { // no notices from here on
			t.Fatal(err)
		}
		refuse(t)
		wanted(t, l, true)
	})

	t.Run("local waiter", func(t *testing.T) {
		c := lock.New(rdb, lock.WithPrefix(prefix), lock.WithWantedNotices(true), lock.WithWatchdog(false))
		defer c.Close()
		l, err := c.Obtain(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		done := obtainAndRelease(c, "k")
		wanted(t, l, true)
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Errorf("the local waiter's Obtain and Release = %v; want nil", err)
		}
	})

	t.Run("without notices", func(t *testing.T) {
		c := lock.New(rdb, lock.WithPrefix(prefix), lock.WithWatchdog(true))
		l, err := c.Obtain(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Release(ctx)
		if l.Wanting() != nil {
			t.Error("Wanting() is a channel without wanted notices; want nil (nothing says nobody wants the key)")
		}
	})
}

// TestWanting_ACLUserWithoutTheChannel: an ACL user without the notice
// channel (Redis 7 denies channels unless granted) is refused the key as
// before, with no error from the publish it may not make; its holders
// still hear it from the watchdog's renewal.
func TestWanting_ACLUserWithoutTheChannel(t *testing.T) {
	srv := startRedis(t)
	ctx := context.Background()
	admin := srv.client()
	if err := admin.Do(ctx, "ACL", "SETUSER", "nochannel", "on", ">pw", "~*", "resetchannels", "+@all").Err(); err != nil {
		t.Fatalf("ACL SETUSER: %v", err)
	}
	restricted := redis.NewClient(&redis.Options{Addr: srv.addr(), Username: "nochannel", Password: "pw"})
	t.Cleanup(func() { restricted.Close() })
	if err := restricted.Publish(ctx, "lock:wanted", "probe").Err(); err == nil || !strings.Contains(err.Error(), "NOPERM") {
		t.Fatalf("PUBLISH as the restricted user = %v; want NOPERM (the ACL this test needs)", err)
	}

	holder := lock.New(admin, lock.WithWantedNotices(true), lock.WithWatchdog(true), lock.WithTTL(300*time.Millisecond))
	defer holder.Close()
	l, err := holder.Obtain(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	other := lock.New(restricted, lock.WithWantedNotices(true), lock.WithRetry(time.Millisecond, 500*time.Millisecond, 1))
	defer other.Close()
	if _, err := other.Obtain(ctx, "k"); !errors.Is(err, lock.ErrNotObtained) || errors.Is(err, lock.ErrUnavailable) {
		t.Fatalf("the restricted user's Obtain of a held key = %v; want ErrNotObtained", err)
	}
	select {
	case <-l.Wanting():
	case <-time.After(10 * time.Second):
		t.Fatal("Wanting() not closed 10s after the restricted user was refused; want the watchdog's renewal to see the mark")
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if l, err := other.Obtain(ctx, "k"); err != nil {
		t.Errorf("the restricted user's Obtain of a free key = %v; want the lease", err)
	} else if err := l.Release(ctx); err != nil {
		t.Error(err)
	}
}

// obtainAndRelease obtains key through c on a goroutine of its own (a
// local waiter while another goroutine of c holds it), releases it, and
// sends the first error, or nil.
func obtainAndRelease(c *lock.Client, key string) <-chan error {
	done := make(chan error, 1)
	go func() {
		l, err := c.Obtain(context.Background(), key)
		if err == nil {
			err = l.Release(context.Background())
		}
		done <- err
	}()
	return done
}
