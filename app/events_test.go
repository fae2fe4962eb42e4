package app_test

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/seckill/seckill/app"
	"github.com/seckill/seckill/internal/config"
	"github.com/seckill/seckill/internal/orderid"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/internal/testenv/mariadb"
	"github.com/seckill/seckill/lock/locktest"
)

// TestEvents_ASaleThroughCrashesIsTheStream is issue 51's must-show: three
// instances with events on sell on a MariaDB of the test's own while
// buyers pay, cancel or abandon (their orders expire). The relay's leader
// is killed (every path of it cut at once, as SIGKILL would: its open
// transactions roll back, its lease lapses unreleased) and started again;
// the broker is killed and started again; MariaDB is SIGKILLed and
// started again. Every buyer told 503 retries with its key. Afterwards,
// once no order is pending and the outbox is all published, the stream
// replayed from its start and deduplicated by event id is exactly the
// outbox (testenv.CheckStream), the outbox is exactly the orders'
// committed changes (testenv.CheckEvents), each order's events in order;
// no acknowledged write is lost, the relay's fence advanced in the
// database, and every instance serves the relay's metrics.
func TestEvents_ASaleThroughCrashesIsTheStream(t *testing.T) {
	if testing.Short() {
		t.Skip("three instances, a private MariaDB and nats-server, each crashed")
	}
	t.Parallel()
	ctx := context.Background()
	ns := testenv.StartNATS(t)
	set, _ := mariadb.SetBehindMover(t, 0, false)
	if err := set.Primary.Exec(ctx, "CREATE DATABASE seckill"); err != nil {
		t.Fatal(err)
	}
	migrate(t, "root@tcp("+set.Primary.Addr+")/seckill")
	db := testenv.DB(t, mariadb.AppDSN(set.Primary.Addr, "seckill"))

	prefix := testenv.Name("test:events") + ":"
	nodes := make([]*crashable, 3)
	urls := make([]string, 3)
	for i := range nodes {
		cfg := config.Default()
		cfg.HTTP.Addr = "127.0.0.1:0"
		cfg.MySQL.MaxOpenConns, cfg.MySQL.MaxIdleConns = 8, 8
		cfg.Admin.Token = token
		cfg.Auth.PaymentTokens = paymentToken
		noShopperAuth(&cfg)
		cfg.Lock.Prefix = prefix
		cfg.Order.PaymentTimeout = 6 * time.Second
		cfg.Order.SweepInterval = 200 * time.Millisecond
		cfg.Events.Enabled = true
		cfg.Events.Interval = 20 * time.Millisecond
		cfg.Events.MaxBackoff = 500 * time.Millisecond
		cfg.Events.PublishTimeout = 2 * time.Second
		nodes[i] = startCrashable(t, cfg, set.Primary.Addr, testenv.RedisAddr(), strings.TrimPrefix(ns.URL, "nats://"))
		urls[i] = nodes[i].url()
	}
	skuID := newSKU(t, urls[0], 1000, 1)
	b := newBuyers(urls, skuID)
	// sale sends n buyers of phase at once while fault strikes, mends
	// it, has those told 503 ask again with their keys; then 6 in 10 pay,
	// 1 cancels, 3 abandon their orders.
	sale := func(phase string, n int, fault, mend func()) {
		t.Helper()
		unknown := make(chan []string, 1)
		go func() { unknown <- b.buy(t, phase, n) }()
		fault()
		u := <-unknown
		mend()
		retryAny(t, b, u, b.order)
		settle(t, b, phase)
	}
	nothing := func() {}

	sale("calm", 30, nothing, nothing)
	leader := relayLeader(t, nodes)
	sale("leader-dies", 60, leader.crash, nothing)
	sale("leader-dead", 30, nothing, leader.start)
	sale("broker-dies", 30, ns.Stop, nothing)
	sale("broker-dead", 30, nothing, ns.Start)
	sale("mariadb-dies", 60, set.Primary.Kill, func() {
		if err := set.Primary.Restart(ctx); err != nil {
			t.Fatal(err)
		}
	})
	sale("after", 30, nothing, nothing)

	waitFor(t, 2*time.Minute, "no order pending (the abandoned ones expired)", func() bool {
		return count(t, db, "SELECT COUNT(*) FROM orders WHERE status = 'pending'") == 0
	})
	waitFor(t, 2*time.Minute, "the outbox all published", func() bool {
		return count(t, db, "SELECT COUNT(*) FROM order_events WHERE published_at IS NULL") == 0
	})

	testenv.CheckInvariants(t, db, skuID)
	lost, acked := b.lostOn(t, db)
	for kind, users := range lost {
		t.Errorf("%d acknowledged %s not in the database: %v", len(users), kind, users)
	}
	key, _ := orderid.ParseKey(nodes[0].cfg.Auth.OrderIDKey)
	codec, err := orderid.New(key)
	if err != nil {
		t.Fatal(err)
	}
	msgs := testenv.CheckStream(t, db, ns.URL, nodes[0].cfg.Events.Stream, codec.Decode)
	for _, typ := range []string{"created", "paid", "cancelled", "expired"} {
		if count(t, db, "SELECT COUNT(*) FROM order_events WHERE type = ?", typ) == 0 {
			t.Errorf("no %s event: the sale did not exercise it", typ)
		}
	}
	if fence := count(t, db, "SELECT fence FROM leader_fences WHERE name = 'order-events'"); fence <= 0 {
		t.Errorf("the relay's fence in leader_fences = %d; want advanced by its fenced marks", fence)
	}
	for i, n := range nodes {
		fams := scrape(t, n.url())
		for _, name := range []string{"seckill_events_backlog", "seckill_events_oldest_unpublished_seconds",
			"seckill_events_published_total", "seckill_events_publish_failures_total", "seckill_events_relay_leader"} {
			if fams[name] == nil {
				t.Errorf("instance %d serves no %s", i, name)
			}
		}
	}
	t.Logf("acknowledged %v; %d events, %d messages in the stream; answers %v", acked,
		count(t, db, "SELECT COUNT(*) FROM order_events"), msgs, b.statuses)
}

// settle has phase's buyers whose orders were acknowledged pay (6 in 10)
// or cancel (1 in 10); the rest abandon theirs to expire. Each answered
// 503 asks again.
func settle(t *testing.T, b *buyers, phase string) {
	t.Helper()
	var pay, cancel []string
	for i, u := range b.ackedOf(phase) {
		switch i % 10 {
		case 0, 1, 2, 3, 4, 5:
			pay = append(pay, u)
		case 6:
			cancel = append(cancel, u)
		}
	}
	retryAny(t, b, b.all(t, pay, b.pay), b.pay)
	retryAny(t, b, b.all(t, cancel, b.cancel), b.cancel)
}

// retryAny runs do again for each user while it answers 503, through the
// next instance each time (one may be down), at most 40 times each, 250
// ms apart: a client's retries with its key behind a load balancer.
func retryAny(t *testing.T, b *buyers, users []string, do func(*testing.T, string, int) int) {
	t.Helper()
	var wg sync.WaitGroup
	for i, u := range users {
		wg.Go(func() {
			for try := range 40 {
				if do(t, u, i+try) != http.StatusServiceUnavailable {
					return
				}
				time.Sleep(250 * time.Millisecond) // the client's back-off
			}
			t.Errorf("%s: still 503 after 40 tries", u)
		})
	}
	wg.Wait()
}

// relayLeader returns the instance whose relay holds the lease, asked
// of the metrics up to 100 times, 100 ms apart.
func relayLeader(t *testing.T, nodes []*crashable) *crashable {
	t.Helper()
	for range 100 {
		var leaders []*crashable
		for _, n := range nodes {
			for _, m := range scrape(t, n.url()).matching("seckill_events_relay_leader") {
				if m.GetGauge().GetValue() == 1 {
					leaders = append(leaders, n)
				}
			}
		}
		if len(leaders) == 1 {
			return leaders[0]
		}
		time.Sleep(100 * time.Millisecond) // the relay's next try for the lease
	}
	t.Fatal("no single relay leader within 10s")
	return nil
}

// waitFor asks cond every 200 ms until it holds, failing the test after d.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(d); !cond(); time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%v and still not %s", d, what)
		}
	}
}

func count(t *testing.T, db *gorm.DB, q string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := db.Raw(q, args...).Scan(&n).Error; err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

// crashable is an instance that can crash: it reaches MariaDB, Redis and
// NATS through proxies of its own, which crash cuts at once, before its
// goroutines are stopped, so that nothing it does after reaches them: as
// SIGKILL, its open transactions roll back and its leases lapse
// unreleased. Buyers reach it at one front address, moved to it when it
// starts again.
type crashable struct {
	t      *testing.T
	cfg    config.Config
	db     string // host:port of each
	redis  string
	nats   string
	front  *locktest.Proxy
	paths  []*locktest.Proxy
	cancel context.CancelFunc
	done   chan error
}

func startCrashable(t *testing.T, cfg config.Config, db, redis, nats string) *crashable {
	t.Helper()
	c := &crashable{t: t, cfg: cfg, db: db, redis: redis, nats: nats}
	c.start()
	t.Cleanup(c.crash)
	return c
}

func (c *crashable) url() string { return "http://" + c.front.Addr }

// start serves the instance, through new paths, and points its front at it.
func (c *crashable) start() {
	t := c.t
	t.Helper()
	db, rd, ns := testenv.StartProxy(t, c.db), testenv.StartProxy(t, c.redis), testenv.StartProxy(t, c.nats)
	c.paths = []*locktest.Proxy{db, rd, ns}
	cfg := c.cfg
	cfg.MySQL.DSN = mariadb.AppDSN(db.Addr, "seckill")
	cfg.Redis.Addrs = []string{rd.Addr}
	cfg.Events.NATSURL = "nats://" + ns.Addr
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	addr := make(chan string, 1)
	c.cancel, c.done = cancel, make(chan error, 1)
	go func() {
		var out bytes.Buffer
		c.done <- app.Serve(ctx, cfg, testenv.Logger(), &out, func(a string) { addr <- a })
	}()
	select {
	case a := <-addr:
		if c.front == nil {
			c.front = testenv.StartProxy(t, a)
		} else {
			c.front.Move(a, true)
			c.front.Restore()
		}
	case err := <-c.done:
		cancel()
		c.cancel = nil
		t.Fatalf("instance did not start: %v", err)
	case <-time.After(20 * time.Second):
		cancel()
		<-c.done
		c.cancel = nil
		t.Fatal("instance did not start within 20s")
	}
}

// crash cuts every path of the instance, then stops what is left of it;
// how it ends is no matter. A crashed instance crashes again as a no-op.
func (c *crashable) crash() {
	if c.cancel == nil {
		return
	}
	for _, p := range c.paths {
		p.Cut()
	}
	c.front.Cut()
	c.cancel()
	<-c.done
	c.cancel = nil
}
