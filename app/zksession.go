package app

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/go-zookeeper/zk"

	"github.com/seckill/seckill/internal/config"
	"github.com/seckill/seckill/lock"
	"github.com/seckill/seckill/lock/zookeeper"
	"github.com/seckill/seckill/locking"
	"github.com/seckill/seckill/service"
	"github.com/seckill/seckill/wiring"
)

// zooKeeper is the ZooKeeper backend of the service: the lock and the
// shared sold-out marks, on one session.
type zooKeeper struct {
	conn   *zk.Conn
	locker *locking.ZooKeeperLocker
	marks  *locking.ZooKeeperMarks
}

// openZooKeeper connects to the ensemble without waiting for a session:
// until one exists, Obtain reports the lock unavailable and orders sell
// on the database's guard alone, as without Redis.
func openZooKeeper(cfg config.Config, log *slog.Logger, obs lock.Observer) (*zooKeeper, error) {
	conn, _, err := zk.Connect(cfg.ZooKeeper.Addrs, cfg.ZooKeeper.SessionTimeout,
		zk.WithLogger(zkLogger{log}), zk.WithLogInfo(false))
	if err != nil {
		return nil, fmt.Errorf("zookeeper: %w", err)
	}
	z := zookeeper.New(conn, zookeeper.Options{
		Root: cfg.ZooKeeper.Root + "/locks", Observer: obs,
		FenceBase: service.ZooKeeperFences, // the range the store knows as ZooKeeper's
		Owner:     wiring.InstanceName(),
	})
	return &zooKeeper{
		conn:   conn,
		locker: locking.NewZooKeeperLocker(z),
		marks:  locking.NewZooKeeperMarks(conn, cfg.ZooKeeper.Root+"/soldout", cfg.SoldOut.SharedTTL),
	}, nil
}

func (z *zooKeeper) Close() error { z.conn.Close(); return nil }

// Up reports nil while the session is connected.
func (z *zooKeeper) Up(context.Context) error { return locking.ZooKeeperUp(z.conn) }

// zkLogger sends the ZooKeeper client's messages to the structured log.
type zkLogger struct{ log *slog.Logger }

func (l zkLogger) Printf(format string, v ...any) {
	l.log.Warn("zookeeper client", "msg", fmt.Sprintf(format, v...))
}
