package app

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/seckill/seckill/internal/config"

	"github.com/seckill/seckill/lock"
	"github.com/seckill/seckill/service"
)

// Every lock adapter of this package inspects its lock.
var (
	_ service.LockInspector = locker{}
	_ service.LockInspector = zkLocker{}
)

// instanceName names this process's leases (lock.WithOwner): the host
// name, which is the pod's in Kubernetes, and the process id.
func instanceName() string {
	host, err := os.Hostname()
	if err != nil {
		host = "unknown"
	}
	return host + "/" + strconv.Itoa(os.Getpid())
}

func (l locker) InspectLock(ctx context.Context, key string) (service.LockState, error) {
	return stateOf(l.c.Inspect(ctx, hashTag(key)))
}

func (l zkLocker) InspectLock(ctx context.Context, key string) (service.LockState, error) {
	return stateOf(l.z.Inspect(ctx, key))
}

// stateOf passes a backend's inspection to the service, translating "the
// backend is unreachable" as leaseOf does.
func stateOf(st lock.State, err error) (service.LockState, error) {
	if errors.Is(err, lock.ErrUnavailable) {
		return service.LockState{}, fmt.Errorf("%w: %w: %w", service.ErrUnavailable, service.ErrLockUnavailable, err)
	}
	if err != nil {
		return service.LockState{}, err
	}
	return lockState(st), nil
}

func lockState(st lock.State) service.LockState {
	s := service.LockState{
		Held: st.Held, Owner: st.Owner, Token: st.Token, Fence: st.Fence, LeaseLeft: st.LeaseLeft,
		Since: st.Since, Renewed: st.Renewed, Wanted: st.Wanted, Waiters: st.Waiters, Queued: st.Queued,
	}
	for _, n := range st.Nodes {
		s.Nodes = append(s.Nodes, lockState(n))
	}
	return s
}

// SKULock is one SKU's lock, as `seckill locks` lists it.
type SKULock struct {
	SKU   int64
	State service.LockState
}

// HeldLocks returns the state of the SKU locks that have a holder now,
// read from the lock backend cfg names (serve's): at most limit keys are
// looked at, found by SCAN under lock.prefix on Redis (every master) and
// as the children of the locks' root on ZooKeeper.
func HeldLocks(ctx context.Context, cfg config.Config, log *slog.Logger, limit int) ([]SKULock, error) {
	var (
		keys    []string
		inspect service.LockInspector
	)
	if cfg.Lock.Backend == config.BackendZooKeeper {
		zkb, err := openZooKeeper(cfg, log, lock.NopObserver{})
		if err != nil {
			return nil, err
		}
		defer zkb.Close()
		for zkb.Up(ctx) != nil && ctx.Err() == nil {
			time.Sleep(10 * time.Millisecond) // waiting for the session, bounded by ctx
		}
		zl := zkb.locker.(zkLocker)
		inspect = zl
		keys, err = zl.z.Keys(ctx, limit)
		if err != nil {
			return nil, err
		}
	} else {
		rs, err := newRedisSetup(cfg, cfg.Redis.Addrs)
		if err != nil {
			return nil, err
		}
		defer rs.Close()
		if len(rs.clients) == 0 {
			return nil, errors.New("no lock store to read: set redis.addrs, or lock.backend zookeeper")
		}
		lc := rs.lockClient(LockOptions(cfg)...)
		inspect = locker{lc}
		tagged, err := lc.HeldKeys(ctx, hashTag("sku:*"), limit)
		if err != nil {
			return nil, err
		}
		for _, k := range tagged {
			keys = append(keys, strings.Trim(k, "{}"))
		}
	}
	var held []SKULock
	for _, k := range keys {
		id, perr := strconv.ParseInt(strings.TrimPrefix(k, "sku:"), 10, 64)
		if perr != nil || !strings.HasPrefix(k, "sku:") {
			continue // another user of the prefix
		}
		st, err := inspect.InspectLock(ctx, k)
		if err != nil {
			return nil, err
		}
		if st.Held {
			held = append(held, SKULock{SKU: id, State: st})
		}
	}
	slices.SortFunc(held, func(a, b SKULock) int { return cmp.Compare(a.SKU, b.SKU) })
	return held, nil
}
