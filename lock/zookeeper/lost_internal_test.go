package zookeeper

import (
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/seckill/seckill/lock/zookeeper/zktest"
)

// TestZooKeeper_LostWithoutItsWatch: a held lock whose watch never fires
// (go-zookeeper can lose one silently across a reconnect) still closes
// Lost once its node is gone, by the recheck.
func TestZooKeeper_LostWithoutItsWatch(t *testing.T) {
	if why := zktest.Missing(); why != "" {
		t.Skip(why)
	}
	z := zktest.Start(t)
	conn := zktest.Conn(t, z.Addrs(), 5*time.Second, nil)
	c := New(conn, Options{Root: "/lost-test"})
	node, err := conn.Create("/lost-node", nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll))
	if err != nil {
		t.Fatal(err)
	}
	_, st, err := conn.Exists(node)
	if err != nil {
		t.Fatal(err)
	}
	l := c.newLock("k", node, st.Czxid, make(chan zk.Event)) // a watch that never fires
	defer l.Release(t.Context())
	select {
	case <-l.Lost():
		t.Fatal("Lost closed while the node exists")
	default:
	}
	if err := conn.Delete(node, -1); err != nil {
		t.Fatal(err)
	}
	select {
	case <-l.Lost():
	case <-time.After(30 * time.Second):
		t.Fatalf("Lost not closed 30s after the node's deletion, with its watch lost (recheck every %v)", lostRecheck)
	}
}
