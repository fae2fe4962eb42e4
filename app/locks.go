package app

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/seckill/seckill/internal/config"
	"github.com/seckill/seckill/lock"
	"github.com/seckill/seckill/locking"
	"github.com/seckill/seckill/service"
	"github.com/seckill/seckill/wiring"
)

// SKULock is one SKU's lock, as `seckill locks` lists it.
type SKULock struct {
	SKU   int64
	State service.LockState
}

// HeldLocks returns the SKU locks held now in the lock backend cfg names,
// looking at no more than limit keys: a SCAN under lock.prefix on every
// Redis master, or the children of the locks' root on ZooKeeper.
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
		inspect = zkb.locker
		keys, err = zkb.locker.Keys(ctx, limit)
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
		rl := locking.NewRedisLocker(rs.lockClient(wiring.LockOptions(cfg)...))
		inspect = rl
		keys, err = rl.HeldKeys(ctx, "sku:*", limit)
		if err != nil {
			return nil, err
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
