package harness

import (
	"context"
	"fmt"
	"syscall"
	"time"
)

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
