package harness

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"time"
)

// inject strikes the configured fault and returns once the victim is back
// (or, when it stays dead, once the survivors have taken over).
func (r *run) inject(ctx context.Context) error {
	switch r.cfg.Fault {
	case FaultPause:
		return r.injectPause(ctx)
	case FaultFailover:
		return r.failover(ctx)
	case FaultZKLeader:
		return r.zkLeaderFault(ctx)
	case FaultMySQLFailover:
		return r.injectMySQLFailover(ctx)
	}
	victims, ready, err := r.victims()
	if err != nil {
		return err
	}
	return r.killAndRestart(ctx, victims, ready)
}

// victims are the processes the redis, instance or mysql fault kills and
// restarts, and how to tell each is back.
func (r *run) victims() ([]*proc, []func(context.Context) error, error) {
	var victims []*proc
	var ready []func(context.Context) error
	switch r.cfg.Fault {
	case FaultRedis:
		for i := range r.cfg.RedisKill {
			addr := r.redisAddrs[i]
			victims = append(victims, r.redis[i])
			ready = append(ready, func(ctx context.Context) error {
				return poll(ctx, "redis-server "+addr, 15*time.Second, 50*time.Millisecond, dialTCP(addr))
			})
		}
	case FaultInstance:
		i := len(r.instances) - 1
		victims = append(victims, r.instances[i])
		ready = append(ready, func(ctx context.Context) error { return r.waitReady(ctx, i, r.baseURLs[i]) })
	case FaultMySQL:
		victims = append(victims, r.mariadb)
		ready = append(ready, func(ctx context.Context) error {
			return poll(ctx, "mariadbd", 60*time.Second, 100*time.Millisecond, pingDB(r.serverDSN))
		})
	default:
		return nil, nil, fmt.Errorf("unknown fault %q", r.cfg.Fault)
	}
	return victims, ready, nil
}

// killAndRestart SIGKILLs the victims, keeps them down for FaultFor and
// starts them again with the same command lines.
func (r *run) killAndRestart(ctx context.Context, victims []*proc, ready []func(context.Context) error) error {
	m := &r.monitor
	names := make([]string, len(victims))
	for i, v := range victims {
		names[i] = v.name
	}
	name := strings.Join(names, ", ")
	m.victims = name
	m.faultStart = time.Now()
	r.event("FAULT: SIGKILL %s (sold %d of %d)", name, m.faultSold, r.cfg.Stock)
	for _, v := range victims {
		if err := v.kill(); err != nil {
			return err
		}
	}
	time.Sleep(r.cfg.FaultFor)
	r.event("FAULT: restarting %s", name)
	for _, v := range victims {
		if err := v.start(); err != nil {
			return err
		}
	}
	for _, f := range ready {
		if err := f(ctx); err != nil {
			return err
		}
	}
	m.faultBack = time.Now()
	r.event("FAULT: %s back after %.1fs", name, m.faultBack.Sub(m.faultStart).Seconds())
	return nil
}

// injectPause freezes the last instance with SIGSTOP for FaultFor (give it
// more than lock.ttl, 3s, to outlive its lease: -fault-for 5s), then
// resumes it with SIGCONT: a process paused mid-sale, a GC pause or a VM
// stall. Its lease expires meanwhile; on resume its stale writes must be
// refused and its stale hints (a sold-out mark) must not be believed
// beyond the documented bound.
func (r *run) injectPause(ctx context.Context) error {
	m := &r.monitor
	i := len(r.instances) - 1
	victim := r.instances[i]
	m.victims = victim.name
	m.faultStart = time.Now()
	r.event("FAULT: SIGSTOP %s (sold %d of %d)", victim.name, m.faultSold, r.cfg.Stock)
	if victim.signal(syscall.SIGSTOP, 0) {
		return fmt.Errorf("%s: gone instead of paused", victim.name)
	}
	time.Sleep(r.cfg.FaultFor)
	r.event("FAULT: SIGCONT %s", victim.name)
	victim.signal(syscall.SIGCONT, 0)
	if err := r.waitReady(ctx, i, r.baseURLs[i]); err != nil {
		return err
	}
	m.faultBack = time.Now()
	r.event("FAULT: %s resumed after %.1fs", victim.name, m.faultBack.Sub(m.faultStart).Seconds())
	return nil
}
