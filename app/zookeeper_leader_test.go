//go:build !race

package app_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testenv"
)

// This test is built without the race detector only: the ZooKeeper client
// (github.com/go-zookeeper/zk v1.0.4, the latest) reads Conn.lastZxid while
// re-sending its watches on a reconnect as its receive loop writes it,
// unsynchronized (upstream: samuel/go-zookeeper#178 and #260,
// go-zookeeper/zk#35, unmerged). A leader's death mid-sale makes every
// instance reconnect with watches set, and -race then fails the test on
// the library's race now and then, whatever the sale did. make test runs
// it in a second go test without -race; every other test keeps -race.

// TestThreeInstancesOnZooKeeperSellExactlyTheStockWhenTheLeaderDies: a
// 3-node ensemble loses its leader mid-sale; sessions move to the
// survivors, which elect a new leader, and exactly the stock is sold.
func TestThreeInstancesOnZooKeeperSellExactlyTheStockWhenTheLeaderDies(t *testing.T) {
	ens := testenv.StartZooKeeperEnsemble(t, 3)
	dsn := testenv.Database(t)
	root := "/" + testenv.Name("seckill")
	urls := []string{
		zkInstance(t, dsn, ens.Addrs(), root),
		zkInstance(t, dsn, ens.Addrs(), root),
		zkInstance(t, dsn, ens.Addrs(), root),
	}
	skuID := createSKU(t, urls[0])
	killed := 0
	statuses := sale(t, urls, skuID, func() {
		if l := ens.Leader(); l != nil {
			l.Stop()
			killed = l.ID
		}
	})
	if killed == 0 {
		t.Error("no leader to kill mid-sale")
	}
	checkStatuses(t, statuses, http.StatusCreated, http.StatusConflict, http.StatusServiceUnavailable)
	verify(t, urls[1], skuID)
	ens.WaitLeader(time.Minute) // the survivors elected another
	t.Logf("leader %d killed mid-sale; statuses %v", killed, statuses)
}
