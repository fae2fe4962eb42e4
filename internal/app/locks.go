package app

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"

	"github.com/seckill/seckill/lock"
	"github.com/seckill/seckill/service"
)

// Every lock adapter of this package inspects its lock.
var (
	_ service.LockInspector = locker{}
	_ service.LockInspector = zkLocker{}
)

// instanceName names this process's leases (lock.WithOwner): the host
// name, which is the pod's in Kubernetes, and the process id.
func instanceName() string {
	host, err := os.Hostname()
	if err != nil {
		host = "unknown"
	}
	return host + "/" + strconv.Itoa(os.Getpid())
}

func (l locker) InspectLock(ctx context.Context, key string) (service.LockState, error) {
	return stateOf(l.c.Inspect(ctx, hashTag(key)))
}

func (l zkLocker) InspectLock(ctx context.Context, key string) (service.LockState, error) {
	return stateOf(l.z.Inspect(ctx, key))
}

// stateOf passes a backend's inspection to the service, translating "the
// backend is unreachable" as leaseOf does.
func stateOf(st lock.State, err error) (service.LockState, error) {
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
