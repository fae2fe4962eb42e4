package harness

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"time"

	"github.com/seckill/seckill/loadtest/verify"
)

// inject strikes the configured fault and returns once the victim is back
// (or, when it stays dead, once the survivors have taken over).
func (r *run) inject(ctx context.Context) error {
	switch r.cfg.Fault {
	case FaultNone:
		return nil
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
	case FaultBroker:
		vs = append(vs, victim{"nats-server", r.nats.Kill, r.nats.Restart})
	default:
		return nil, fmt.Errorf("unknown fault %q", r.cfg.Fault)
	}
	return vs, nil
}

// strike notes the fault's victims and window around fault, which
// returns once they (or the survivors) serve again, saying how.
func (r *run) strike(victims, what string, fault func() (done string, err error)) error {
	m := &r.monitor
	m.victims, m.faultStart = victims, time.Now()
	r.event("FAULT: %s (sold %d of %d)", what, m.faultSold, r.cfg.Stock)
	done, err := fault()
	if err != nil {
		return err
	}
	m.faultBack = time.Now()
	r.event("FAULT: %s %.1fs after the fault struck", done, m.faultBack.Sub(m.faultStart).Seconds())
	return nil
}

// killAndRestart SIGKILLs the victims, keeps them down for FaultFor and
// starts them again with the same command lines.
func (r *run) killAndRestart(ctx context.Context, victims []victim) error {
	names := make([]string, len(victims))
	for i, v := range victims {
		names[i] = v.name
	}
	name := strings.Join(names, ", ")
	return r.strike(name, "SIGKILL "+name, func() (string, error) {
		for _, v := range victims {
			v.kill()
		}
		r.holdDown(ctx)
		r.event("FAULT: restarting %s", name)
		for _, v := range victims {
			if err := v.restart(ctx); err != nil {
				return "", err
			}
		}
		return name + " back", nil
	})
}

// injectPause freezes the last instance with SIGSTOP for FaultFor (past
// lock.ttl, 3s, it outlives its lease: -fault-for 5s), then resumes it: a
// GC pause or a VM stall, whose stale writes must be refused and stale
// hints not believed beyond the documented bound.
func (r *run) injectPause(ctx context.Context) error {
	i := len(r.instances) - 1
	victim, name := r.instances[i], instanceName(i)
	return r.strike(name, "SIGSTOP "+name, func() (string, error) {
		if err := victim.Signal(syscall.SIGSTOP); err != nil {
			return "", fmt.Errorf("%s: %w", name, err)
		}
		time.Sleep(r.cfg.FaultFor)
		r.event("FAULT: SIGCONT %s", name)
		if err := victim.Signal(syscall.SIGCONT); err != nil {
			return "", fmt.Errorf("%s: %w", name, err)
		}
		return name + " resumed", victim.Await(ctx, instanceReady)
	})
}

// holdDown keeps the victims down for FaultFor. Under the broker fault it
// reads, meanwhile, the outbox's backlog and its age that the instances
// show (the relay leader's), and what is sold: the sale must go on and
// the metrics must show the events waiting.
func (r *run) holdDown(ctx context.Context) {
	if r.cfg.Fault != FaultBroker {
		time.Sleep(r.cfg.FaultFor)
		return
	}
	m := &r.monitor
	for end := time.Now().Add(r.cfg.FaultFor); time.Now().Before(end); sleepCtx(ctx, 500*time.Millisecond) {
		for i := range r.baseURLs {
			mctx, cancel := context.WithTimeout(ctx, time.Second)
			n, _, _ := r.metric(mctx, i, "seckill_events_backlog ")
			age, _, _ := r.metric(mctx, i, "seckill_events_oldest_unpublished_seconds ")
			cancel()
			m.outage.Backlog, m.outage.AgeS = max(m.outage.Backlog, int64(n)), max(m.outage.AgeS, age)
		}
	}
	if _, sold, err := r.stockReading(ctx); err == nil {
		m.outage.Sold = sold - m.faultSold
	}
}

// BrokerOutage is what the broker fault saw while nats-server was down.
type BrokerOutage struct {
	Backlog int64   `json:"max_backlog"`      // seckill_events_backlog, the largest read
	AgeS    float64 `json:"max_oldest_age_s"` // seckill_events_oldest_unpublished_seconds, the largest read
	Sold    int64   `json:"sold_while_down"`  // units sold meanwhile
	Left    int64   `json:"stock_at_fault"`   // what was left to sell when it struck
}

// violations: the sale stopped, or the metrics never showed the events
// waiting, while the broker was down.
func (o BrokerOutage) violations(down time.Duration) []verify.Violation {
	var msgs []string
	if o.Left > 0 && o.Sold == 0 {
		msgs = append(msgs, fmt.Sprintf("nothing sold in the %v the broker was down, with %d units left", down, o.Left))
	}
	if o.Backlog == 0 || o.AgeS == 0 {
		msgs = append(msgs, fmt.Sprintf("the instances' metrics never showed the events waiting while the broker was down (backlog %d, oldest %.1fs)", o.Backlog, o.AgeS))
	}
	return violationsOf(BrokerDown, msgs...)
}
