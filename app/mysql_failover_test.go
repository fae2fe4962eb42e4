package app_test

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/audit"
	"github.com/seckill/seckill/internal/config"
	"github.com/seckill/seckill/internal/database"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/internal/testenv/mariadb"
)

// TestMySQLFailover_AcknowledgedOrdersSurvive is the MariaDB failover of
// docs/locking.md at small scale, on servers of its own: a primary and
// two replicas (GTID, semi-sync AFTER_SYNC with a 1 s timeout), two
// instances reaching the primary through one address. Orders are sold;
// the replicas' IO threads stop (semi-sync falls back to asynchronous);
// more orders are sold, a third of the earlier ones paid, a third
// cancelled, the stock set by the admin; the primary is SIGKILLed, the
// more advanced replica promoted, the other re-pointed to it, the address
// moved; the clients of the stalled phase retry what was answered 503
// (with their keys; paying, cancelling and setting the stock are
// idempotent), new buyers come, and the last third and half of the new
// orders are paid, the rest cancelled. Every write acknowledged (order,
// payment, cancel, stock) must be on the survivor, and its books must
// balance. With mysql.min_replicas 0 the stalled phase's acknowledged
// writes of each kind are lost (the test shows it); with 1 none is, and
// the instances sell and take payments again on the promoted server
// without a restart.
func TestMySQLFailover_AcknowledgedOrdersSurvive(t *testing.T) {
	for _, min := range []int{0, 1} {
		t.Run(fmt.Sprintf("min_replicas=%d", min), func(t *testing.T) {
			lost, acked := failoverSale(t, min)
			for _, kind := range writeKinds {
				switch n := len(lost[kind]); {
				case min == 0 && n == 0:
					t.Errorf("min_replicas 0: none of %d acknowledged %s lost; the scenario did not stall the replicas", acked[kind], kind)
				case min > 0 && n > 0:
					t.Errorf("min_replicas %d: %d of %d acknowledged %s not on the survivor: %v", min, n, acked[kind], kind, lost[kind])
				}
			}
		})
	}
}

// failoverSale runs the scenario and returns, by kind, the acknowledged
// writes missing on the survivor, and how many were acknowledged.
func failoverSale(t *testing.T, minReplicas int) (lost map[string][]string, acked map[string]int) {
	ctx := context.Background()
	set, mover := primaryBehindMover(t, 2)
	urls := replicatedInstances(t, mover, set.Replicas, minReplicas, "failover")
	skuID := newSKU(t, urls[0], 1000, 1)

	b := newBuyers(urls, skuID)
	b.buy(t, "before", 40)
	placed := b.ackedOf("before")
	if len(placed) < 3 {
		t.Fatalf("%d orders acknowledged before the stall; want 3 or more", len(placed))
	}
	third := len(placed) / 3
	payNow, cancelNow, payLater := placed[:third], placed[third:2*third], placed[2*third:]
	for _, r := range set.Replicas {
		if err := r.StopIO(ctx); err != nil {
			t.Fatal(err)
		}
	}
	stalled := b.buy(t, "stalled", 24)
	unpaid := b.all(t, payNow, b.pay)
	uncancelled := b.all(t, cancelNow, b.cancel)
	restock := b.restockTo(2000)
	unstocked := b.all(t, []string{"admin"}, restock)
	noticed(t, urls, minReplicas)
	set.Primary.Kill()
	promoted, others := mostAdvanced(t, set.Replicas)
	if err := promoted.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	for _, o := range others {
		if err := o.Follow(ctx, promoted); err != nil {
			t.Fatal(err)
		}
	}
	mover.Move(promoted.Addr, true)

	// The retries of the stalled phase's unknowns, then new buyers; then
	// payments and cancels: each client asks again while it is told 503,
	// a bounded number of times.
	b.retry(t, stalled, b.order)
	b.retry(t, unpaid, b.pay)
	b.retry(t, uncancelled, b.cancel)
	b.retry(t, unstocked, restock)
	before := b.count(b.acked)
	b.buy(t, "after", 24)
	if minReplicas > 0 && b.count(b.acked) == before {
		t.Errorf("nothing acknowledged after the failover: the instances did not follow the promoted primary")
	}
	fresh := b.ackedOf("after")
	paidBefore := b.count(b.paid)
	b.retry(t, b.all(t, slices.Concat(payLater, fresh[:len(fresh)/2]), b.pay), b.pay)
	b.retry(t, b.all(t, fresh[len(fresh)/2:], b.cancel), b.cancel)
	if b.count(b.paid) == paidBefore {
		t.Errorf("no payment acknowledged after the failover: the payments did not go on")
	}

	survivor := testenv.DB(t, mariadb.AppDSN(promoted.Addr, "seckill"))
	testenv.CheckInvariants(t, survivor, skuID)
	lost, acked = b.lostOn(t, survivor)
	auditAfterFailover(t, promoted, others[0], set.Primary, skuID)
	t.Logf("min_replicas %d: acknowledged %v; lost %v; answers %v", minReplicas, acked, lost, b.statuses)
	return lost, acked
}

// primaryBehindMover starts a primary and n replicas of the test's own
// (semi-sync, 1 s), the one address the instances reach the primary at,
// and the schema on it.
func primaryBehindMover(t *testing.T, n int) (*mariadb.Set, *mariadb.Mover) {
	t.Helper()
	set, mover := mariadb.SetBehindMover(t, n, true)
	if err := set.Primary.Exec(context.Background(), "CREATE DATABASE seckill"); err != nil {
		t.Fatal(err)
	}
	migrate(t, "root@tcp("+mover.Addr+")/seckill")
	return set, mover
}

// replicatedInstances starts two instances on mover's address with
// replicas listed and min of them asked for, and returns their URLs.
func replicatedInstances(t *testing.T, mover *mariadb.Mover, replicas []*mariadb.Server, min int, name string) []string {
	t.Helper()
	prefix := testenv.Name(name) + ":"
	var urls []string
	for range 2 {
		cfg := config.Default()
		cfg.HTTP.Addr = "127.0.0.1:0"
		cfg.MySQL.DSN = mariadb.AppDSN(mover.Addr, "seckill")
		cfg.MySQL.MaxOpenConns, cfg.MySQL.MaxIdleConns = 8, 8
		cfg.MySQL.MinReplicas = min
		for _, r := range replicas {
			cfg.MySQL.Replicas = append(cfg.MySQL.Replicas, mariadb.AppDSN(r.Addr, ""))
		}
		cfg.Redis.Addrs = []string{testenv.RedisAddr()}
		cfg.Admin.Token = token
		cfg.Auth.PaymentTokens = paymentToken
		noShopperAuth(&cfg)
		cfg.Lock.Prefix = prefix
		urls = append(urls, "http://"+serveConfig(t, cfg))
	}
	return urls
}

// auditAfterFailover runs the audit's replica comparison: the replica
// that follows the survivor agrees with it; the old primary, started
// again on its data, holds the stalled phase's commits (acknowledged or
// not), which the survivor lacks: the SKU is named.
func auditAfterFailover(t *testing.T, survivor, follower, old *mariadb.Server, skuID int64) {
	t.Helper()
	ctx := context.Background()
	open := func(s *mariadb.Server) *sql.DB {
		db, err := sql.Open("mysql", mariadb.AppDSN(s.Addr, "seckill"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	diffs, cu, err := audit.CompareReplica(ctx, open(survivor), open(follower), 30)
	if err != nil {
		t.Fatal(err)
	}
	if !cu.Waited || len(diffs) != 0 {
		t.Errorf("audit -replica of the survivor's follower: caught up %v, %d SKUs differ %+v; want caught up, none", cu.Waited, len(diffs), diffs)
	}
	if err := old.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	diffs, _, err = audit.CompareReplica(ctx, open(survivor), open(old), 0.1)
	if err != nil {
		t.Fatal(err)
	}
	if len(diffs) != 1 || diffs[0].SKU != skuID {
		t.Errorf("audit -replica of the old primary: %+v; want sku %d named", diffs, skuID)
	}
}

// noticed checks what an operator sees of the stall: /admin/v1/readyz
// reports semi-sync fallen back to asynchronous (the watch reads it
// every 2s: asked up to 50 times, 200ms apart) and, when orders wait for
// the replicas, a lagging replica and the unconfirmed orders counted.
func noticed(t *testing.T, urls []string, minReplicas int) {
	t.Helper()
	var repl map[string]any
	for range 50 {
		status, body := call(t, http.MethodGet, urls[0]+"/admin/v1/readyz", "", "Authorization", "Bearer "+token)
		repl, _ = body["mysql_replication"].(map[string]any)
		if status == http.StatusOK && repl != nil && repl["semi_sync"] == "off" {
			break
		}
		time.Sleep(200 * time.Millisecond) // the watch's next probe
	}
	if repl == nil || repl["semi_sync"] != "off" {
		t.Errorf("readyz mysql_replication = %v; want semi_sync off", repl)
	}
	if strings.Contains(fmt.Sprint(repl), "@tcp(") {
		t.Errorf("readyz mysql_replication shows a DSN: %v", repl)
	}
	if minReplicas == 0 {
		return
	}
	lagging := false
	replicas, _ := repl["replicas"].([]any)
	for _, r := range replicas {
		lagging = lagging || r.(map[string]any)["state"] == "lagging"
	}
	if !lagging {
		t.Errorf("readyz replicas = %v; want one lagging", replicas)
	}
	unconfirmed := 0.0
	for _, u := range urls {
		unconfirmed += scrape(t, u).value("seckill_orders_unconfirmed_total")
	}
	if unconfirmed == 0 {
		t.Error("seckill_orders_unconfirmed_total = 0 on every instance; want the stalled orders counted")
	}
}

func migrate(t *testing.T, dsn string) {
	t.Helper()
	db, err := database.OpenMySQL(dsn, database.Options{MaxOpenConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer database.Close(db)
	if err := database.Migrate(context.Background(), db, "up", io.Discard); err != nil {
		t.Fatal(err)
	}
}

// mostAdvanced returns the replica that applied the most (the one a
// runbook promotes) and the others, once each applied its relay log.
func mostAdvanced(t *testing.T, rs []*mariadb.Server) (*mariadb.Server, []*mariadb.Server) {
	t.Helper()
	best, bestSeq := 0, int64(-1)
	for i, r := range rs {
		if err := r.WaitApplied(context.Background(), 30*time.Second); err != nil {
			t.Fatal(err)
		}
		pos, err := r.Applied(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		var d, s, seq int64
		fmt.Sscanf(pos, "%d-%d-%d", &d, &s, &seq)
		if seq > bestSeq {
			best, bestSeq = i, seq
		}
	}
	var others []*mariadb.Server
	for i, r := range rs {
		if i != best {
			others = append(others, r)
		}
	}
	return rs[best], others
}
