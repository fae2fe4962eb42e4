package harness

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/seckill/seckill/internal/testenv/mariadb"
)

// FaultMySQLFailover loses the MariaDB primary's machine mid-sale
// (loadtest/README.md, "MariaDB failover"): the replicas of its own
// primary stall, the primary is SIGKILLed, the more advanced replica
// promoted and the one address the instances reach moved to it.
const FaultMySQLFailover = "mysql-failover"

// mysqlFailoverSetup is the fault's servers and address, and the writes
// beside k6's orders.
type mysqlFailoverSetup struct {
	set    *mariadb.Set
	mover  *mariadb.Mover
	writes *failoverWrites
}

// startMySQLFailover starts the fault's servers and returns the root DSN
// of the moving address, without a database.
func (r *run) startMySQLFailover(ctx context.Context) (string, error) {
	r.event("starting a MariaDB primary and two replicas (GTID, semi-sync AFTER_SYNC, 1s timeout)")
	set, err := mariadb.StartSet(ctx, filepath.Join(r.work, "mysql"), 2, true)
	r.stops = append(r.stops, set.Stop) // whatever happens next
	r.myfail = &mysqlFailoverSetup{set: set, writes: newFailoverWrites()}
	if err != nil {
		return "", err
	}
	if r.myfail.mover, err = mariadb.NewMover(set.Primary.Addr); err != nil {
		return "", err
	}
	r.stops = append(r.stops, r.myfail.mover.Close)
	return "root@tcp(" + r.myfail.mover.Addr + ")/", nil
}

// mysqlFailoverEnv is the instances' database settings: the application
// user (no privilege that bypasses read_only) through the moving address,
// and both replicas.
func (r *run) mysqlFailoverEnv() []string {
	var replicas []string
	for _, s := range r.myfail.set.Replicas {
		replicas = append(replicas, mariadb.AppDSN(s.Addr, ""))
	}
	return []string{
		"SECKILL_MYSQL_DSN=" + mariadb.AppDSN(r.myfail.mover.Addr, r.dbName),
		"SECKILL_MYSQL_REPLICAS=" + strings.Join(replicas, ","),
		"SECKILL_MYSQL_MIN_REPLICAS=" + strconv.Itoa(r.cfg.MySQLMinReplicas),
	}
}

// injectMySQLFailover stalls the replicas, loses the primary and fails
// over to the more advanced replica.
func (r *run) injectMySQLFailover(ctx context.Context) error {
	set := r.myfail.set
	what := fmt.Sprintf("replicas' IO threads stopped for %v (mysql.min_replicas %d)", r.cfg.FaultFor, r.cfg.MySQLMinReplicas)
	return r.strike("mariadb primary (server 1)", what, func() (string, error) {
		for _, s := range set.Replicas {
			if err := s.StopIO(ctx); err != nil {
				return "", err
			}
		}
		r.restockDuringStall(ctx)
		time.Sleep(r.cfg.FaultFor)
		set.Primary.Kill()
		r.event("FAULT: SIGKILL the primary")
		best, bestSeq := -1, int64(-1)
		for i, s := range set.Replicas {
			if err := s.WaitApplied(ctx, 30*time.Second); err != nil {
				return "", err
			}
			pos, err := s.Applied(ctx)
			var d, srv, seq int64
			if err == nil {
				_, err = fmt.Sscanf(pos, "%d-%d-%d", &d, &srv, &seq)
			}
			if err != nil {
				return "", fmt.Errorf("replica %d: position %q: %w", s.ID, pos, err)
			}
			if seq > bestSeq {
				best, bestSeq = i, seq
			}
		}
		promoted := set.Replicas[best]
		if err := promoted.Promote(ctx); err != nil {
			return "", err
		}
		for i, s := range set.Replicas {
			if i != best {
				if err := s.Follow(ctx, promoted); err != nil {
					return "", err
				}
			}
		}
		r.myfail.mover.Move(promoted.Addr, true)
		return fmt.Sprintf("server %d promoted (applied up to seq %d), the other replica follows it, the address moved", promoted.ID, bestSeq), nil
	})
}
