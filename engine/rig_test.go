package engine_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill/seckill/engine"
	"github.com/seckill/seckill/service"
	"github.com/seckill/seckill/wiring/wiringtest"
)

// rig is one service instance on a real MariaDB database and real Redis,
// with its observer.
type rig struct {
	*wiringtest.Instance
	obs *observer
}

// rigOptions change a rig from production's.
type rigOptions = wiringtest.Options

func newRig(t *testing.T, dsn string, o rigOptions) *rig {
	t.Helper()
	obs := &observer{depth: make(chan int, 100000)}
	o.Observer = obs
	return &rig{Instance: wiringtest.New(t, dsn, o), obs: obs}
}

// newFlow is wiringtest.NewFlow; obs may be nil.
func newFlow(tb testing.TB, commits engine.Committer, reads service.OrderReader, locker engine.Locker, marks service.SoldOutMarks, board engine.PlaceBoard,
	dcfg service.DirectoryConfig, cfg engine.Config, obs *observer) (*service.Orders, *service.Directory, *engine.Seller) {
	tb.Helper()
	var o wiringtest.Observer
	if obs != nil {
		o = obs
	}
	return wiringtest.NewFlow(tb, commits, reads, locker, marks, board, dcfg, cfg, o)
}

// newOrders is newFlow's order flow alone.
func newOrders(tb testing.TB, commits engine.Committer, reads service.OrderReader, locker engine.Locker, marks service.SoldOutMarks, board engine.PlaceBoard,
	dcfg service.DirectoryConfig, cfg engine.Config, obs *observer) *service.Orders {
	tb.Helper()
	o, _, _ := newFlow(tb, commits, reads, locker, marks, board, dcfg, cfg, obs)
	return o
}

// observer records queue depths so tests can wait for "queued" without sleeping.
type observer struct {
	depth       chan int
	unpublished atomic.Int64
	unlocked    atomic.Int64 // orders sold without the lock (SoldUnlocked)
}

func (o *observer) OrderResult(string) {}
func (o *observer) QueueDepth(_ int64, d int) {
	select {
	case o.depth <- d:
	default:
	}
}
func (o *observer) QueueRejected(int64)                  {}
func (o *observer) Batch(int, time.Duration, int, error) {}
func (o *observer) Degraded(bool)                        {}
func (o *observer) SoldOutFastPath()                     {}
func (o *observer) MarkUnpublished()                     { o.unpublished.Add(1) }
func (o *observer) KnownRow(bool)                        {}
func (o *observer) Unconfirmed(int)                      {}
func (o *observer) SoldUnlocked(n int)                   { o.unlocked.Add(int64(n)) }
func (o *observer) Allotted(int)                         {}
func (o *observer) Waiters(int64, int64)                 {}

// waitDepth waits until the queue of the test's SKU reported depth >= n.
func (o *observer) waitDepth(t *testing.T, n int) {
	t.Helper()
	timeout := time.After(time.Minute) // bounded; a busy machine queues slowly
	for {
		select {
		case d := <-o.depth:
			if d >= n {
				return
			}
		case <-timeout:
			t.Fatalf("queue never reached depth %d", n)
		}
	}
}
