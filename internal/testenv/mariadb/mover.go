package mariadb

import (
	"context"

	"github.com/seckill/seckill/lock/locktest"
)

// Mover is one TCP address in front of a server, moved to another
// (Move) the way an operator moves a virtual IP or a DNS name after a
// failover.
type Mover = locktest.Proxy

// NewMover listens on a free loopback port and forwards to target until
// Close.
func NewMover(target string) (*Mover, error) { return locktest.NewProxy(target, nil) }

// TB is what SetBehindMover needs of a test.
type TB interface {
	Helper()
	TempDir() string
	Cleanup(func())
	Fatal(args ...any)
}

// SetBehindMover starts a primary and n replicas of the test's own
// (StartSet) and a Mover at the primary: the one address clients reach
// the primary at, moved on a failover. Both end with the test.
func SetBehindMover(t TB, n int, semiSync bool) (*Set, *Mover) {
	t.Helper()
	set, err := StartSet(context.Background(), t.TempDir(), n, semiSync)
	t.Cleanup(set.Stop)
	if err != nil {
		t.Fatal(err)
	}
	mover, err := NewMover(set.Primary.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(mover.Close)
	return set, mover
}
