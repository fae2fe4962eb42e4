package app_test

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
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
// more orders are sold; the primary is SIGKILLed, the more advanced
// replica promoted, the other re-pointed to it, the address moved; the
// buyers of the stalled phase retry with their keys and new buyers come.
// Every order acknowledged (201/200) must be on the survivor, and its
// books must balance. With mysql.min_replicas 0 the stalled phase's
// acknowledged orders are lost (the test shows it); with 1 none is, and
// the instances sell again on the promoted server without a restart.
func TestMySQLFailover_AcknowledgedOrdersSurvive(t *testing.T) {
	for _, min := range []int{0, 1} {
		t.Run(fmt.Sprintf("min_replicas=%d", min), func(t *testing.T) {
			lost, acked := failoverSale(t, min)
			switch {
			case min == 0 && lost == 0:
				t.Errorf("min_replicas 0: no acknowledged order lost (%d acknowledged); the scenario did not stall the replicas", acked)
			case min > 0 && lost > 0:
				t.Errorf("min_replicas %d: %d of %d acknowledged orders are not on the survivor", min, lost, acked)
			}
		})
	}
}

// failoverSale runs the scenario and returns the acknowledged orders
// missing on the survivor, and how many were acknowledged.
func failoverSale(t *testing.T, minReplicas int) (lost, acked int) {
	ctx := context.Background()
	set, err := mariadb.StartSet(ctx, t.TempDir(), 2, true)
	t.Cleanup(set.Stop)
	if err != nil {
		t.Fatal(err)
	}
	mover, err := mariadb.NewMover(set.Primary.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(mover.Close)
	if err := set.Primary.Exec(ctx, "CREATE DATABASE seckill"); err != nil {
		t.Fatal(err)
	}
	migrate(t, "root@tcp("+mover.Addr+")/seckill")

	redisAddr := testenv.RedisAddr()
	prefix := testenv.Name("failover") + ":"
	var urls []string
	for range 2 {
		cfg := config.Default()
		cfg.HTTP.Addr = "127.0.0.1:0"
		cfg.MySQL.DSN = mariadb.AppDSN(mover.Addr, "seckill")
		cfg.MySQL.MaxOpenConns, cfg.MySQL.MaxIdleConns = 8, 8
		cfg.MySQL.MinReplicas = minReplicas
		for _, r := range set.Replicas {
			cfg.MySQL.Replicas = append(cfg.MySQL.Replicas, mariadb.AppDSN(r.Addr, ""))
		}
		cfg.Redis.Addrs = []string{redisAddr}
		cfg.Admin.Token = token
		noShopperAuth(&cfg)
		cfg.Lock.Prefix = prefix
		urls = append(urls, "http://"+serveConfig(t, cfg))
	}
	skuID := newSKU(t, urls[0], 1000, 1)

	b := &buyers{urls: urls, sku: skuID, acked: map[string]bool{}, statuses: map[string]int{}}
	b.buy(t, "before", 40)
	if len(b.acked) == 0 {
		t.Fatal("nothing acknowledged before the stall")
	}
	for _, r := range set.Replicas {
		if err := r.StopIO(ctx); err != nil {
			t.Fatal(err)
		}
	}
	stalled := b.buy(t, "stalled", 24)
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

	// Retries of the stalled phase's unknowns with their own keys, then
	// new buyers: each asks again while it is told 503, a bounded number
	// of times.
	b.retry(t, stalled)
	before := len(b.acked)
	b.buy(t, "after", 24)
	if minReplicas > 0 && len(b.acked) == before {
		t.Errorf("nothing acknowledged after the failover: the instances did not follow the promoted primary")
	}

	survivor := testenv.DB(t, mariadb.AppDSN(promoted.Addr, "seckill"))
	testenv.CheckInvariants(t, survivor, skuID)
	var users []string
	if err := survivor.Raw("SELECT user_id FROM orders WHERE sku_id = ?", skuID).Scan(&users).Error; err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, u := range users {
		have[u] = true
	}
	var missing []string
	for u := range b.acked {
		if !have[u] {
			missing = append(missing, u)
		}
	}
	sort.Strings(missing)
	auditAfterFailover(t, promoted, others[0], set.Primary, skuID)
	t.Logf("min_replicas %d: %d acknowledged, %d on the survivor, %d lost %v; answers %v", minReplicas, len(b.acked), len(users), len(missing), missing, b.statuses)
	return len(missing), len(b.acked)
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

// buyers places orders of one unit, each buyer once with its own key, and
// keeps who was acknowledged.
type buyers struct {
	urls []string
	sku  int64

	mu       sync.Mutex
	acked    map[string]bool
	statuses map[string]int // answers by status and code
}

// buy sends n new buyers of phase at once and returns those whose answer
// was 503 (unknown or unavailable).
func (b *buyers) buy(t *testing.T, phase string, n int) []string {
	t.Helper()
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		unknown []string
	)
	for i := range n {
		user := fmt.Sprintf("%s-%d", phase, i)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if b.order(t, user, i) == http.StatusServiceUnavailable {
				mu.Lock()
				unknown = append(unknown, user)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return unknown
}

// retry asks again for each user, with its key, while the answer is 503,
// at most 40 times each.
func (b *buyers) retry(t *testing.T, users []string) {
	t.Helper()
	var wg sync.WaitGroup
	for i, u := range users {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 40 {
				if b.order(t, u, i) != http.StatusServiceUnavailable {
					return
				}
				time.Sleep(250 * time.Millisecond) // a client's back-off
			}
			t.Errorf("%s: still 503 after 40 tries", u)
		}()
	}
	wg.Wait()
}

func (b *buyers) order(t *testing.T, user string, i int) int {
	body := fmt.Sprintf(`{"sku_id":%d,"user_id":%q,"quantity":1}`, b.sku, user)
	req, err := http.NewRequest(http.MethodPost, b.urls[i%len(b.urls)]+"/api/v1/orders", strings.NewReader(body))
	if err != nil {
		t.Error(err)
		return 0
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", user)
	resp, err := client.Do(req)
	if err != nil {
		return http.StatusServiceUnavailable // a dropped connection: as unknown
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	b.mu.Lock()
	defer b.mu.Unlock()
	code := ""
	if resp.StatusCode >= 400 {
		if i := strings.Index(string(raw), `"code":"`); i >= 0 {
			code = strings.SplitN(string(raw)[i+8:], `"`, 2)[0]
		}
	}
	b.statuses[fmt.Sprintf("%d %s", resp.StatusCode, code)]++
	if resp.StatusCode == http.StatusCreated || resp.StatusCode == http.StatusOK {
		b.acked[user] = true
	}
	return resp.StatusCode
}
