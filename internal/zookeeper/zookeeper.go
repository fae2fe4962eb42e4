package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/seckill/seckill/internal/config"
	"github.com/seckill/seckill/lock"
	"github.com/seckill/seckill/lock/zookeeper"
	"github.com/seckill/seckill/service"
)

// zooKeeper is the ZooKeeper backend of the service: the lock and the
// shared sold-out marks, on one session.
type zooKeeper struct {
	conn   *zk.Conn
	locker service.Locker
	marks  service.SoldOutMarks
}

// openZooKeeper connects to the ensemble. It does not wait for a session:
// until there is one, Obtain reports the lock unavailable and the order path
// sells on the database's guard alone (degraded), as without Redis.
func openZooKeeper(cfg config.Config, log *slog.Logger, obs lock.Observer) (*zooKeeper, error) {
	conn, _, err := zk.Connect(cfg.ZooKeeper.Addrs, cfg.ZooKeeper.SessionTimeout,
		zk.WithLogger(zkLogger{log}), zk.WithLogInfo(false))
	if err != nil {
		return nil, fmt.Errorf("zookeeper: %w", err)
	}
	z := zookeeper.NewZooKeeper(conn, zookeeper.ZooKeeperOptions{
		Root: cfg.ZooKeeper.Root + "/locks", Observer: obs,
		FenceBase: service.ZooKeeperFences, // the range the Store knows as ZooKeeper's
		Owner:     instanceName(),
	})
	return &zooKeeper{
		conn:   conn,
		locker: zkLocker{z},
		marks:  NewZooKeeperSoldOutMarks(conn, cfg.ZooKeeper.Root+"/soldout", cfg.SoldOut.SharedTTL),
	}, nil
}

func (z *zooKeeper) Close() error { z.conn.Close(); return nil }

// Up reports nil while the session is connected.
func (z *zooKeeper) Up(context.Context) error {
	if st := z.conn.State(); st != zk.StateHasSession {
		return fmt.Errorf("zookeeper: session %v", st)
	}
	return nil
}

// zkLocker adapts *zookeeper.ZooKeeper to service.Locker.
type zkLocker struct{ z *zookeeper.ZooKeeper }

func (l zkLocker) Obtain(ctx context.Context, key string) (service.Lease, error) {
	return leaseOf(l.z.Obtain(ctx, key))
}

// zkReadiness reports the ZooKeeper session where the Redis readiness
// reports Redis: /readyz's "redis" field is the lock backend's state.
type zkReadiness struct {
	store service.Store
	zk    *zooKeeper
}

func (r zkReadiness) MySQL(ctx context.Context) error { return r.store.Ping(ctx) }
func (r zkReadiness) Redis(ctx context.Context) error { return r.zk.Up(ctx) }

// NewZooKeeperSoldOutMarks returns the shared sold-out marks kept in
// ZooKeeper: one persistent znode per SKU under dir holding
// "incarnation:mark" (the SKU's created_at in µs, then its signed version
// mark; a mark of another incarnation reads as no mark). A mark older than ttl (by the znode's mtime, the leader's
// clock) reads as no mark and is deleted, as the Redis mark expires. Only
// SKUs that exist get a mark (marks are set after a commit or a restock),
// so their number is bounded by the catalogue.
//
// Why a shared mark beside the local marks re-checked against the
// database (sold_out.recheck): it spreads the news of a sell-out at once,
// keeping a sold-out SKU's buyers off the database on every instance; the
// re-check bounds how long any mark can outlive a restock.
func NewZooKeeperSoldOutMarks(conn *zk.Conn, dir string, ttl time.Duration) service.SoldOutMarks {
	return zkMarks{conn: conn, dir: dir, ttl: ttl}
}

type zkMarks struct {
	conn *zk.Conn
	dir  string
	ttl  time.Duration
}

func (m zkMarks) path(id int64) string { return m.dir + "/" + strconv.FormatInt(id, 10) }

func (m zkMarks) expired(st *zk.Stat) bool {
	return time.Since(time.UnixMilli(st.Mtime)) > m.ttl
}

// get returns the stored mark of sku's incarnation (0 for another's), and
// the znode's stat, nil when there is none.
func (m zkMarks) get(ctx context.Context, sku service.SKURef) (int64, *zk.Stat, error) {
	var (
		data []byte
		st   *zk.Stat
	)
	err := m.do(ctx, func() (err error) { data, st, err = m.conn.Get(m.path(sku.ID)); return err })
	if errors.Is(err, zk.ErrNoNode) {
		return 0, nil, nil
	}
	if err != nil {
		return 0, nil, err
	}
	inc, mark, ok := strings.Cut(string(data), ":")
	if !ok || inc != strconv.FormatInt(sku.Incarnation, 10) {
		return 0, st, nil // another SKU's, or an older format
	}
	v, err := strconv.ParseInt(mark, 10, 64)
	if err != nil {
		return 0, nil, fmt.Errorf("zookeeper mark %s: %w", m.path(sku.ID), err)
	}
	return v, st, nil
}

func (m zkMarks) Mark(ctx context.Context, sku service.SKURef) (int64, error) {
	v, st, err := m.get(ctx, sku)
	if err != nil || st == nil {
		return 0, err
	}
	if m.expired(st) {
		// Best effort: a concurrent SetMark bumps the version and wins.
		_ = m.do(ctx, func() error { return m.conn.Delete(m.path(sku.ID), st.Version) })
		return 0, nil
	}
	return v, nil
}

// SetMark writes mark unless the stored one is of the same incarnation
// and a newer version, with a compare-and-set on the znode's version.
func (m zkMarks) SetMark(ctx context.Context, sku service.SKURef, mark int64) error {
	id := sku.ID
	data := []byte(strconv.FormatInt(sku.Incarnation, 10) + ":" + strconv.FormatInt(mark, 10))
	for range 16 { // each retry means another instance wrote meanwhile
		cur, st, err := m.get(ctx, sku)
		if err != nil {
			return err
		}
		if st == nil {
			err = m.do(ctx, func() error {
				_, err := m.conn.Create(m.path(id), data, zk.FlagPersistent, zk.WorldACL(zk.PermAll))
				if errors.Is(err, zk.ErrNoNode) {
					_, err = m.conn.CreateContainer(m.dir, nil, zk.FlagContainer, zk.WorldACL(zk.PermAll))
					if err == nil || errors.Is(err, zk.ErrNodeExists) {
						_, err = m.conn.Create(m.path(id), data, zk.FlagPersistent, zk.WorldACL(zk.PermAll))
					}
				}
				return err
			})
		} else {
			if abs(mark) < abs(cur) && !m.expired(st) {
				return nil
			}
			err = m.do(ctx, func() error { _, err := m.conn.Set(m.path(id), data, st.Version); return err })
		}
		if errors.Is(err, zk.ErrNodeExists) || errors.Is(err, zk.ErrBadVersion) {
			continue
		}
		return err
	}
	return fmt.Errorf("zookeeper mark %s: too much contention", m.path(id))
}

func abs(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

// markTimeout bounds one request for a mark, as redis.io_timeout does
// with Redis: the order path never waits long for a hint.
const markTimeout = 500 * time.Millisecond

// do runs a blocking ZooKeeper request for at most markTimeout and until
// ctx is done (the request itself finishes in the background), and fails at
// once without a session.
func (m zkMarks) do(ctx context.Context, req func() error) error {
	if st := m.conn.State(); st != zk.StateHasSession {
		return fmt.Errorf("zookeeper: session %v", st)
	}
	ctx, cancel := context.WithTimeout(ctx, markTimeout)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- req() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// zkLogger sends the ZooKeeper client's messages to the structured log.
type zkLogger struct{ log *slog.Logger }

func (l zkLogger) Printf(format string, v ...any) {
	l.log.Warn("zookeeper client", "msg", fmt.Sprintf(format, v...))
}
