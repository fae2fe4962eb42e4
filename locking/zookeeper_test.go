package locking_test

import (
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/locking"
)

// TestZooKeeperMarks_KeepTheNewestVersionOfTheirIncarnation: a mark of an
// older version does not overwrite a newer one, and a mark of another
// incarnation of the SKU (a recreated database) reads as no mark; the
// first mark creates the marks' directory.
func TestZooKeeperMarks_KeepTheNewestVersionOfTheirIncarnation(t *testing.T) {
	z := testenv.StartZooKeeper(t)
	conn := testenv.ZKConn(t, z.Addrs(), 10*time.Second, nil)
	m := locking.NewZooKeeperMarks(conn, "/"+testenv.Name("marks"), time.Minute)
	marksKeepTheNewestVersionOfTheirIncarnation(t, m)
}
