// Package locking passes the answers of the lock library, from any of its
// backends, to the service in the service's terms: its sentinel errors and
// its LockState.
package locking

import (
	"errors"
	"fmt"

	"github.com/seckill/seckill/lock"
	"github.com/seckill/seckill/service"
)

// Lease passes a backend's Obtain answer to the service, translating "the
// backend is unreachable" into service.ErrLockUnavailable (the order path
// then sells on the database's guard alone) and "held by live holders"
// into service.ErrLockBusy (it waits its turn).
func Lease[L service.Lease](lk L, err error) (service.Lease, error) {
	switch {
	case errors.Is(err, lock.ErrUnavailable):
		return nil, fmt.Errorf("%w: %w", service.ErrLockUnavailable, err)
	case errors.Is(err, lock.ErrContended):
		return nil, fmt.Errorf("%w: %w", service.ErrLockBusy, err)
	}
	if err != nil {
		return nil, err
	}
	return lk, nil
}

// State passes a backend's inspection to the service, translating "the
// backend is unreachable" as Lease does.
func State(st lock.State, err error) (service.LockState, error) {
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
