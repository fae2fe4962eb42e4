// Package locking fits the lock library to the engine's and the
// service's ports, on Redis (package lock) and on ZooKeeper
// (lock/zookeeper): the per-SKU lock and the sweeper's election, the
// shared sold-out marks, and each backend's health for readiness. A
// backend out of reach answers service.ErrLockUnavailable; a lock held by
// live holders, service.ErrLockBusy.
package locking

import (
	"errors"
	"fmt"

	"github.com/seckill/seckill/engine"
	"github.com/seckill/seckill/lock"
	"github.com/seckill/seckill/service"
)

// asLease passes a backend's Obtain answer to the engine, translating
// "the backend is unreachable" into service.ErrLockUnavailable (the order
// path then sells on the database's guard alone) and "held by live
// holders" into service.ErrLockBusy (it waits its turn).
func asLease[L engine.Lease](lk L, err error) (engine.Lease, error) {
	if err != nil {
		return nil, obtainError(err)
	}
	return lk, nil
}

// asLeadership passes a backend's Obtain answer to the sweeper's
// election (service.Elector), translating errors as asLease does.
func asLeadership[L service.Leadership](lk L, err error) (service.Leadership, error) {
	if err != nil {
		return nil, obtainError(err)
	}
	return lk, nil
}

func obtainError(err error) error {
	switch {
	case errors.Is(err, lock.ErrUnavailable):
		return fmt.Errorf("%w: %w", service.ErrLockUnavailable, err)
	case errors.Is(err, lock.ErrContended):
		return fmt.Errorf("%w: %w", service.ErrLockBusy, err)
	}
	return err
}

// asState passes a backend's inspection to the service, translating "the
// backend is unreachable" as asLease does.
func asState(st lock.State, err error) (service.LockState, error) {
	if errors.Is(err, lock.ErrUnavailable) {
		return service.LockState{}, fmt.Errorf("%w: %w: %w", service.ErrUnavailable, service.ErrLockUnavailable, err)
	}
	if err != nil {
		return service.LockState{}, err
	}
	return lockState(st), nil
}

func lockState(st lock.State) service.LockState {
	s := service.LockState{
		Held: st.Held, Owner: st.Owner, Token: st.Token, Fence: st.Fence, LeaseLeft: st.LeaseLeft,
		Since: st.Since, Renewed: st.Renewed, Wanted: st.Wanted, Waiters: st.Waiters, Queued: st.Queued,
	}
	for _, n := range st.Nodes {
		s.Nodes = append(s.Nodes, lockState(n))
	}
	return s
}
