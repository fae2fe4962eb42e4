package service_test

import (
	"sync/atomic"
	"testing"
	"time"

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
	obs := &observer{}
	o.Observer = obs
	return &rig{Instance: wiringtest.New(t, dsn, o), obs: obs}
}

// observer counts the restocks whose shared mark was not written.
type observer struct {
	unpublished atomic.Int64
}

func (o *observer) OrderResult(string)                   {}
func (o *observer) QueueDepth(int64, int)                {}
func (o *observer) QueueRejected(int64)                  {}
func (o *observer) Batch(int, time.Duration, int, error) {}
func (o *observer) Degraded(bool)                        {}
func (o *observer) SoldOutFastPath()                     {}
func (o *observer) MarkUnpublished()                     { o.unpublished.Add(1) }
func (o *observer) KnownRow(bool)                        {}
func (o *observer) Unconfirmed(int)                      {}
func (o *observer) SoldUnlocked(int)                     {}
func (o *observer) Allotted(int)                         {}
func (o *observer) Waiters(int64, int64)                 {}
