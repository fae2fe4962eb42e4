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
	victims, err := r.victims()
	if err != nil {
		return err
	}
	return r.killAndRestart(ctx, victims)
}

// victim is what the redis, instance or mysql fault kills and restarts.
type victim struct {
	name    string
	kill    func()
	restart func(context.Context) error // starts it again and waits until it serves
}

// victims are the fault's.
func (r *run) victims() ([]victim, error) {
	var vs []victim
	switch r.cfg.Fault {
	case FaultRedis:
		for i, p := range r.redis[:r.cfg.RedisKill] {
			vs = append(vs, victim{fmt.Sprintf("redis-server-%d", i), p.Kill, p.Restart})
		}
	case FaultInstance:
		i := len(r.instances) - 1
		p := r.instances[i]
		vs = append(vs, victim{instanceName(i), p.Kill, func(ctx context.Context) error { return p.Start(ctx, instanceReady) }})
	case FaultMySQL:
		vs = append(vs, victim{"mariadbd", r.mariadb.Kill, r.mariadb.Restart})
	default:
		return nil, fmt.Errorf("unknown fault %q", r.cfg.Fault)
	}
	return vs, nil
}

// killAndRestart SIGKILLs the victims, keeps them down for FaultFor and
// starts them again with the same command lines.
func (r *run) killAndRestart(ctx context.Context, victims []victim) error {
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
		v.kill()
	}
	time.Sleep(r.cfg.FaultFor)
	r.event("FAULT: restarting %s", name)
	for _, v := range victims {
		if err := v.restart(ctx); err != nil {
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
	victim, name := r.instances[i], instanceName(i)
	m.victims = name
	m.faultStart = time.Now()
	r.event("FAULT: SIGSTOP %s (sold %d of %d)", name, m.faultSold, r.cfg.Stock)
	if err := victim.Signal(syscall.SIGSTOP); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	time.Sleep(r.cfg.FaultFor)
	r.event("FAULT: SIGCONT %s", name)
	if err := victim.Signal(syscall.SIGCONT); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if err := victim.Await(ctx, instanceReady); err != nil {
		return err
	}
	m.faultBack = time.Now()
	r.event("FAULT: %s resumed after %.1fs", name, m.faultBack.Sub(m.faultStart).Seconds())
	return nil
}
