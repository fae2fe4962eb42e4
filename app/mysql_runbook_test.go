package app_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/internal/testenv/mariadb"
)

// TestMySQLFailover_OneReplicaRunbook is docs/operations.md's failover
// runbook with one primary and one replica, mysql.min_replicas 1, two
// instances (issue 46 f): the primary is lost, the replica promoted
// behind the primary's address. With no replica left nothing can be
// acknowledged: orders are 503, /readyz says mysql_replicas short and the
// admin view names the promoted server is_primary. The old primary is
// rebuilt as a replica of the promoted one (report_host set, as the
// runbook says): it is found on the primary and the sale, and the
// payments, go on, with no restart of either instance; nothing
// acknowledged is lost.
func TestMySQLFailover_OneReplicaRunbook(t *testing.T) {
	ctx := context.Background()
	set, mover := primaryBehindMover(t, 1)
	replica := set.Replicas[0]
	urls := replicatedInstances(t, mover, set.Replicas, 1, "runbook")
	skuID := newSKU(t, urls[0], 1000, 1)
	b := newBuyers(urls, skuID)
	b.buy(t, "before", 10)
	if len(b.ackedOf("before")) == 0 {
		t.Fatal("nothing acknowledged before the failover")
	}

	set.Primary.Kill()
	if err := replica.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	mover.Move(replica.Addr, true)
	readyOn(t, urls, http.StatusServiceUnavailable, "short")
	var st map[string]any
	for range 100 { // the watch probes every 2s
		st = adminReplication(t, urls[0])
		if reps, _ := st["replicas"].([]any); len(reps) == 1 && reps[0].(map[string]any)["state"] == "is_primary" {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if reps, _ := st["replicas"].([]any); len(reps) != 1 || reps[0].(map[string]any)["state"] != "is_primary" || st["primary_server_id"] != float64(replica.ID) {
		t.Errorf("admin readyz after the promotion: %v; want the listed replica is_primary, server %d", st, replica.ID)
	}
	orphans := b.buy(t, "orphan", 4)
	if len(orphans) != 4 {
		t.Errorf("%d of 4 orders with no replica to confirm them were not 503", 4-len(orphans))
	}

	if _, err := set.AddReplica(ctx, 9, replica); err != nil { // the old primary, rebuilt
		t.Fatal(err)
	}
	readyOn(t, urls, http.StatusOK, "ok")
	b.retry(t, orphans, b.order)
	b.buy(t, "after", 10)
	if len(b.ackedOf("after")) == 0 {
		t.Error("nothing acknowledged once the rebuilt replica follows: the service did not find it")
	}
	b.retry(t, b.all(t, b.ackedOf("after"), b.pay), b.pay)
	if b.count(b.paid) == 0 {
		t.Error("no payment acknowledged after the failover")
	}
	survivor := testenv.DB(t, mariadb.AppDSN(replica.Addr, "seckill"))
	testenv.CheckInvariants(t, survivor, skuID)
	lost, acked := b.lostOn(t, survivor)
	for kind, l := range lost {
		if len(l) > 0 {
			t.Errorf("%d of %d acknowledged %s are not on the survivor: %v", len(l), acked[kind], kind, l)
		}
	}
	t.Logf("acknowledged %v; answers %v", acked, b.statuses)
}

// readyOn waits, up to 20s (the watch probes every 2s), until every
// instance's /readyz answers status with mysql_replicas replicas.
func readyOn(t *testing.T, urls []string, status int, replicas string) {
	t.Helper()
	for _, u := range urls {
		var (
			got  int
			body map[string]any
		)
		for range 100 {
			if got, body = call(t, http.MethodGet, u+"/readyz", ""); got == status && body["mysql_replicas"] == replicas {
				break
			}
			time.Sleep(200 * time.Millisecond) // the watch's next probe
		}
		if got != status || body["mysql_replicas"] != replicas {
			t.Fatalf("%s/readyz = %d %v; want %d with mysql_replicas %q", u, got, body, status, replicas)
		}
	}
}

// adminReplication returns the admin readiness's mysql_replication.
func adminReplication(t *testing.T, url string) map[string]any {
	t.Helper()
	_, body := call(t, http.MethodGet, url+"/admin/v1/readyz", "", "Authorization", "Bearer "+token)
	st, _ := body["mysql_replication"].(map[string]any)
	return st
}
