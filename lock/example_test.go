package lock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/lock"
)

// Obtain a lock, do the work, release it. Obtain waits (retrying with
// back-off) while someone else holds the key, until ctx ends.
func ExampleClient_Obtain() {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	// The watchdog renews the lease while held, as README.md's example has it.
	locks := lock.New(rdb, lock.WithPrefix("example:"), lock.WithTTL(10*time.Second), lock.WithWatchdog(true))

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	l, err := locks.Obtain(ctx, "obtain")
	if err != nil {
		fmt.Println("not obtained:", err)
		return
	}
	fmt.Println("held", l.Key(), "with a fence:", l.Fence() > 0)
	// ... the critical section ...
	if err := l.Release(ctx); err != nil {
		fmt.Println("release:", err)
	}
	// Output: held obtain with a fence: true
}

// Release deletes the lease only if it is still the holder's: a second
// release, or one after the lease expired, is ErrNotHeld and touches
// nothing that another holder may own.
func ExampleLock_Release() {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	locks := lock.New(rdb, lock.WithPrefix("example:"))
	ctx := context.Background()

	l, err := locks.Obtain(ctx, "release")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("first release:", l.Release(ctx))
	err = l.Release(ctx)
	fmt.Println("second release:", err, errors.Is(err, lock.ErrNotHeld))
	// Output:
	// first release: <nil>
	// second release: lock: not held true
}

// Keep holds a key across batches of work while nobody else wants it, and
// lets it go as soon as another client is refused it.
func ExampleLock_Keep() {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	worker := lock.New(rdb, lock.WithPrefix("example:"))
	// A back-off cap of a minute: its three attempts still back off a
	// millisecond or two, and a refused attempt marks the key wanted for
	// twice the cap (at most a lease), so Keep below reads the mark however
	// slow the box.
	other := lock.New(rdb, lock.WithPrefix("example:"), lock.WithRetry(time.Millisecond, time.Minute, 3))
	ctx := context.Background()

	l, err := worker.Obtain(ctx, "keep")
	if err != nil {
		fmt.Println(err)
		return
	}
	kept, err := l.Keep(ctx) // after a first batch: nobody waits
	fmt.Println("kept:", kept, err)

	_, err = other.Obtain(ctx, "keep") // three quick attempts, refused: the key is now wanted
	fmt.Println("other:", err)

	kept, err = l.Keep(ctx) // after a second batch: released for the other
	fmt.Println("kept:", kept, err, "wanted:", l.Wanted())

	next, err := other.Obtain(ctx, "keep")
	if err != nil {
		fmt.Println("other:", err)
		return
	}
	fmt.Println("other:", err, "fence above:", next.Fence() > l.Fence())
	_ = next.Release(ctx)
	// Output:
	// kept: true <nil>
	// other: lock: not obtained
	// kept: false <nil> wanted: true
	// other: <nil> fence above: true
}

// account is a resource guarded by fences: it refuses a write carrying a
// fence below the highest it has seen, so a holder whose lease expired
// (paused, partitioned) cannot overwrite its successor's work.
type account struct {
	mu      sync.Mutex
	fence   int64
	balance int
}

func (a *account) set(fence int64, balance int) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if fence < a.fence {
		return fmt.Errorf("stale fence %d: the lease was lost", fence)
	}
	a.fence, a.balance = fence, balance
	return nil
}

// Fence is what makes a lock safe to rely on: pass it with every write and
// let the resource refuse a lower one.
func ExampleLock_Fence() {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	// Two processes' clients (one Client's goroutines would queue locally).
	a := lock.New(rdb, lock.WithPrefix("example:"), lock.WithTTL(50*time.Millisecond))
	b := lock.New(rdb, lock.WithPrefix("example:"))
	ctx := context.Background()
	acct := &account{}

	first, err := a.Obtain(ctx, "fence")
	if err != nil {
		fmt.Println(err)
		return
	}
	// The first holder stalls past its 50ms lease; a second one takes over.
	second, err := b.Obtain(ctx, "fence") // waits for the lease to expire
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("second writes:", acct.set(second.Fence(), 100))
	fmt.Println("first writes:", acct.set(first.Fence(), 50) != nil)
	fmt.Println("balance:", acct.balance)
	fmt.Println("first releases:", first.Release(ctx))
	_ = second.Release(ctx)
	// Output:
	// second writes: <nil>
	// first writes: true
	// balance: 100
	// first releases: lock: not held
}

// NewRedlock holds each lease on a majority of independent masters. There
// are no fences (Fence is 0): guard the resource with a version instead.
// Three databases of one server stand in for three masters here.
func ExampleNewRedlock() {
	var masters []redis.UniversalClient
	for db := range 3 {
		rdb := redis.NewClient(&redis.Options{Addr: redisAddr, DB: db})
		defer rdb.Close()
		masters = append(masters, rdb)
	}
	locks := lock.NewRedlock(masters, lock.WithPrefix("example:"), lock.WithOwner("worker-1"))
	ctx := context.Background()

	l, err := locks.Obtain(ctx, "redlock")
	if err != nil {
		fmt.Println(err)
		return
	}
	st, err := locks.Inspect(ctx, "redlock")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("fence:", l.Fence())
	fmt.Println("held by", st.Owner, "on", len(st.Nodes), "masters:", st.Held)
	fmt.Println("release:", l.Release(ctx))
	// Output:
	// fence: 0
	// held by worker-1 on 3 masters: true
	// release: <nil>
}

// Inspect says who holds a key (owner, a prefix of the token, the fence,
// the lease left) without taking or extending the lease.
func ExampleClient_Inspect() {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	locks := lock.New(rdb, lock.WithPrefix("example:"), lock.WithOwner("worker-1"))
	ctx := context.Background()

	st, err := locks.Inspect(ctx, "inspect")
	fmt.Println("before:", st.Held, err)

	l, err := locks.Obtain(ctx, "inspect")
	if err != nil {
		fmt.Println(err)
		return
	}
	st, err = locks.Inspect(ctx, "inspect")
	if err != nil {
		fmt.Println(err)
		return
	}
	_, token := lock.SplitToken(l.Token())
	fmt.Println("held by", st.Owner, "token", st.Token == token, "fence", st.Fence == l.Fence(),
		"lease left", st.LeaseLeft > 0)

	_ = l.Release(ctx)
	st, err = locks.Inspect(ctx, "inspect")
	fmt.Println("after:", st.Held, err)
	// Output:
	// before: false <nil>
	// held by worker-1 token true fence true lease left true
	// after: false <nil>
}
