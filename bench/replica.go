package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/seckill/seckill/internal/testenv/mariadb"
)

// Cases of the MariaDB replication's cost: the locked strategy on a
// throwaway primary with one local replica, answering at COMMIT
// (mysql.min_replicas 0) and once the replica confirms (1), interleaved
// so that a drifting machine moves both sides. Both run on the same
// primary (binary log on), so the ratio is the confirmation's cost alone.
const (
	caseReplicated0 = "locked, MariaDB primary + replica, min_replicas 0"
	caseReplicated1 = "locked, MariaDB primary + replica, min_replicas 1"
)

// replicatedCases are the replication rows, min_replicas 0 around each 1.
func replicatedCases(vus int) []benchCase {
	zero := benchCase{name: caseReplicated0, strategy: "locked", vus: vus, skus: 1, replicated: true}
	one := benchCase{name: caseReplicated1, strategy: "locked", vus: vus, skus: 1, replicated: true, mysqlMinReplicas: 1}
	return []benchCase{zero, one, zero, one, zero}
}

// replicated is the primary and replica of the replication rows, started
// by the first of them and kept for the rest of the run (every case has
// its own database).
type replicated struct {
	dir string
	set *mariadb.Set
}

// server returns the DSN (root, no database) of the case's server and the
// service's settings: the replicated primary, or serverDSN as given.
func (rp *replicated) server(ctx context.Context, c benchCase, serverDSN string) (string, []string, error) {
	if !c.replicated {
		return serverDSN, nil, nil
	}
	if rp.set == nil {
		if err := os.MkdirAll(rp.dir, 0o755); err != nil {
			return "", nil, err
		}
		set, err := mariadb.StartSet(ctx, rp.dir, 1, false)
		rp.set = set
		if err != nil {
			return "", nil, fmt.Errorf("mariadb primary and replica: %w", err)
		}
	}
	return rp.set.Primary.RootDSN(), []string{
		"SECKILL_MYSQL_REPLICAS=" + rp.set.Replicas[0].RootDSN(),
		"SECKILL_MYSQL_MIN_REPLICAS=" + strconv.Itoa(c.mysqlMinReplicas),
	}, nil
}

func (rp *replicated) stop() { rp.set.Stop() }

// writeReplicationRatio adds what the confirmation costs: min_replicas 1
// over 0 on the same primary.
func writeReplicationRatio(w io.Writer, find finder, vus int) {
	zero, one := find(caseReplicated0, vus), find(caseReplicated1, vus)
	if zero == nil || one == nil {
		return
	}
	fmt.Fprintf(w, "MariaDB min_replicas 1 / 0 (local replica), orders/s @%d\t%s\t≥ 0.9×\n", vus, ratio(one, zero, orders))
	fmt.Fprintf(w, "MariaDB min_replicas 1 / 0 (local replica), p99 @%d\t%s\t\n", vus, ratio(one, zero, p99))
}
