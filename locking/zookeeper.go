package locking

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/seckill/seckill/engine"
	"github.com/seckill/seckill/lock/zookeeper"
	"github.com/seckill/seckill/service"
)

var (
	_ engine.Locker         = (*ZooKeeperLocker)(nil)
	_ service.Elector       = (*ZooKeeperLocker)(nil)
	_ service.LockInspector = (*ZooKeeperLocker)(nil)
)

// ZooKeeperLocker is the service's lock on ZooKeeper: a *zookeeper.Client
// as engine.Locker and service.Elector.
type ZooKeeperLocker struct{ z *zookeeper.Client }

// NewZooKeeperLocker returns the service's lock over z.
func NewZooKeeperLocker(z *zookeeper.Client) *ZooKeeperLocker { return &ZooKeeperLocker{z} }

// Obtain takes the lock of key in the order its contenders queued;
// rank is ignored.
func (l *ZooKeeperLocker) Obtain(ctx context.Context, key string, _ int64) (engine.Lease, error) {
	lk, err := l.z.Obtain(ctx, key)
	return asLease(zooKeeperLease{lk}, err)
}

// Ranks reports false: ZooKeeper's lock queues its contenders by arrival
// at the ensemble, not by rank.
func (l *ZooKeeperLocker) Ranks() bool { return false }

// Elect takes the lock of key: the sweeper's election.
func (l *ZooKeeperLocker) Elect(ctx context.Context, key string) (service.Leadership, error) {
	lk, err := l.z.Obtain(ctx, key)
	return asLeadership(lk, err)
}

// zooKeeperLease is a ZooKeeper lock as an engine.Lease: it says the
// horizon of its fences (the latest zxid), but hears neither who wants it
// nor their ranks, and cannot be kept past a hold.
type zooKeeperLease struct{ *zookeeper.Lock }

var _ engine.Horizoner = zooKeeperLease{}

// InspectLock reads the state of key's lock without taking it.
func (l *ZooKeeperLocker) InspectLock(ctx context.Context, key string) (service.LockState, error) {
	return asState(l.z.Inspect(ctx, key))
}

// Keys returns up to limit keys that have a lock node; see
// zookeeper.Client.Keys.
func (l *ZooKeeperLocker) Keys(ctx context.Context, limit int) ([]string, error) {
	return l.z.Keys(ctx, limit)
}

// ZooKeeperUp reports nil while conn has a session: without one, Obtain
// reports the lock unavailable.
func ZooKeeperUp(conn *zk.Conn) error {
	if st := conn.State(); st != zk.StateHasSession {
		return fmt.Errorf("zookeeper: session %v", st)
	}
	return nil
}

var _ service.SoldOutMarks = (*ZooKeeperMarks)(nil)

// ZooKeeperMarks keeps the shared sold-out marks in ZooKeeper: a
// persistent znode per existing SKU under dir, holding "incarnation:mark"
// (created_at in µs, the signed version mark). A mark of another
// incarnation, or older than ttl by its mtime, reads as none, and an old
// one is deleted.
//
// It spreads a sell-out to every instance at once; the local re-check
// (sold_out.recheck) bounds how long a mark outlives a restock.
type ZooKeeperMarks struct {
	conn *zk.Conn
	dir  string
	ttl  time.Duration
}

// NewZooKeeperMarks returns the shared sold-out marks kept under dir on
// conn's ensemble, each read as gone after ttl.
func NewZooKeeperMarks(conn *zk.Conn, dir string, ttl time.Duration) *ZooKeeperMarks {
	return &ZooKeeperMarks{conn: conn, dir: dir, ttl: ttl}
}

func (m *ZooKeeperMarks) path(id int64) string { return m.dir + "/" + strconv.FormatInt(id, 10) }

func (m *ZooKeeperMarks) expired(st *zk.Stat) bool {
	return time.Since(time.UnixMilli(st.Mtime)) > m.ttl
}

// get returns the stored mark of sku's incarnation (0 for another's), and
// the znode's stat, nil when there is none.
func (m *ZooKeeperMarks) get(ctx context.Context, sku service.SKURef) (int64, *zk.Stat, error) {
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

// Mark returns the stored mark of sku's incarnation, 0 when there is none
// or it is older than the ttl.
func (m *ZooKeeperMarks) Mark(ctx context.Context, sku service.SKURef) (int64, error) {
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
func (m *ZooKeeperMarks) SetMark(ctx context.Context, sku service.SKURef, mark int64) error {
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

// do runs a blocking ZooKeeper request for at most markTimeout or until
// ctx is done (the request finishes in the background), failing at once
// without a session.
func (m *ZooKeeperMarks) do(ctx context.Context, req func() error) error {
	if err := ZooKeeperUp(m.conn); err != nil {
		return err
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
