package harness

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/seckill/seckill/loadtest/verify"
)

// The first-come-first-served run (-scenario fair, loadtest/README.md)
// spreads its buyers over fairOver and counts those served out of arrival
// order by more than fairTolerance.
const (
	fairOver      = time.Second
	fairTolerance = 100 * time.Millisecond
)

// fairBuyer is one buyer's first arrival and final answer.
type fairBuyer struct {
	arrived, answered time.Time
	status, tries     int
	code              string
	orderID           int64
	ref, state        string // the order's id and status as the buyer was told them
	position          int64  // a waiting order's place in line
	unsure            bool   // an attempt's outcome was unknown (503 or no answer)
}

// joined reports whether the buyer was told its order waits: 202, or 200
// for a retry of one.
func (b fairBuyer) joined() bool {
	return b.status == http.StatusAccepted || (b.status == http.StatusOK && b.state == "waiting")
}

// maxFairTries bounds each buyer's attempts.
const maxFairTries = 20

// RunFair starts the database, a private Redis and cfg's instances (with
// cfg.Env), sends the buyers (default 12,000) for a SKU of units (default
// 3,000), counts who was served out of arrival order and holds every
// answer to the sale's checks.
func RunFair(ctx context.Context, cfg Config, units int64, buyers int) (res ScenarioResult, err error) {
	orDefault(&units, 3000)
	orDefault(&buyers, 12000)
	if int64(buyers) <= units {
		return res, fmt.Errorf("the buyers (%d) must outnumber the units (%d): the run measures who loses", buyers, units)
	}
	// Buyers are named in the body; every one of them may wait at once.
	sc := scenario{name: "fair", conns: fairConnsPerInstance, units: units, soldOut: true, env: append([]string{"SECKILL_AUTH_SHOPPER=none"}, cfg.Env...)}
	r, err := sc.start(ctx, cfg)
	defer r.stop()
	if err != nil {
		return res, err
	}
	fr := &fairRun{run: r, name: "fair", buyers: make([]fairBuyer, buyers)}
	fr.warm(ctx, min(buyers/len(r.instances)+1, fairConnsPerInstance))
	clock, clockErr := startPackets(ctx, r.dir, r.ports())
	defer clock.stop()
	r.event("fair: %d buyers over %s", buyers, fairOver)
	start := time.Now()
	fr.send(ctx, fairOver)
	if err := ctx.Err(); err != nil {
		return res, err
	}
	took := time.Since(start)
	arrivals := timeArrivals(ctx, clock, clockErr, fr)
	env := "defaults"
	if len(cfg.Env) > 0 {
		env = strings.Join(cfg.Env, " ")
	}
	res.line("fair: %d units, %d buyers over %s, %d instance(s), %s (%.1fs)", units, buyers, fairOver, len(r.instances), env, took.Seconds())
	res.line("  arrivals: %s", arrivals)
	fr.count(&res, units)
	res.line("  orders sold without the lock (degraded, in one instance's order): %d", fr.metricSum(ctx, "seckill_orders_unlocked_total "))
	return res, r.checkAnswers(ctx, &res, units, clientsOf(fr), fr.attempts)
}

// clientsOf is what the crowds' buyers were told, as sale.js records it.
func clientsOf(crowds ...*fairRun) verify.Clients {
	var c verify.Clients
	for _, fr := range crowds {
		for k, b := range fr.buyers {
			user := fr.user(k)
			switch {
			case b.status == http.StatusCreated || b.status == http.StatusOK || b.status == http.StatusAccepted:
				c.Acknowledged = append(c.Acknowledged, verify.Ack{OrderID: b.orderID, UserID: user})
			case b.unsure && b.status == http.StatusConflict:
				c.Refused = append(c.Refused, verify.Refusal{Key: fr.key(k), UserID: user, Code: b.code})
			case b.unsure:
				c.Unsure = append(c.Unsure, user)
			}
		}
	}
	return c
}

// fairRun is the state of one crowd of buyers: the fair run's, or the
// waitlist run's holders or waiters.
type fairRun struct {
	*run
	name     string // buyer k is <name>-k, its Idempotency-Key <name>-key-k
	wait     bool   // the buyers ask with "wait": true
	buyers   []fairBuyer
	mu       sync.Mutex
	attempts []verify.Attempt // every order request, for the history
}

func (fr *fairRun) user(k int) string { return fr.name + "-" + strconv.Itoa(k) }
func (fr *fairRun) key(k int) string  { return fr.name + "-key-" + strconv.Itoa(k) }

// fairConnsPerInstance bounds the connections kept open to each instance.
const fairConnsPerInstance = 12000

// warm opens n connections to every instance before the sale: a dial on a
// busy box can take longer than the tolerance, and would reorder the
// arrivals before the service sees them.
func (fr *fairRun) warm(ctx context.Context, n int) {
	var wg sync.WaitGroup
	for _, url := range fr.baseURLs {
		for range n {
			wg.Go(func() { _, _ = fr.run.send(ctx, http.MethodGet, url+"/healthz", "", "") })
		}
	}
	wg.Wait()
}

// send starts buyer k at k·over/len(buyers) after the first, at instance
// k mod the instances, and waits for every buyer's final answer.
func (fr *fairRun) send(ctx context.Context, over time.Duration) {
	var wg sync.WaitGroup
	n := len(fr.buyers)
	start := time.Now()
	for k := range n {
		if d := time.Until(start.Add(over * time.Duration(k) / time.Duration(n))); d > 0 {
			sleepCtx(ctx, d)
		}
		if ctx.Err() != nil {
			break
		}
		wg.Go(func() { fr.buy(ctx, k) })
	}
	wg.Wait()
}

// buy sends buyer k's order until it gets an answer other than "come back
// later", waiting Retry-After between tries, each try at the next instance.
func (fr *fairRun) buy(ctx context.Context, k int) {
	b := &fr.buyers[k]
	user, key := fr.user(k), fr.key(k)
	body := fmt.Sprintf(`{"sku_id":%d,"user_id":%q,"quantity":1,"wait":%t}`, fr.skuID, user, fr.wait)
	b.arrived = time.Now()
	for try := 0; try < maxFairTries && ctx.Err() == nil; try++ {
		i := (k + try) % len(fr.baseURLs)
		call := time.Now()
		p, err := fr.run.send(ctx, http.MethodPost, fr.baseURLs[i]+"/api/v1/orders", body, "", "Idempotency-Key", key)
		a := p.answer()
		b.orderID, _ = fr.orderIDs.Decode(a.OrderID)
		b.ref, b.state, b.position = a.OrderID, a.Status, a.Position
		b.tries++
		b.status, b.code, b.answered = p.status, a.Error.Code, time.Now()
		if err != nil {
			b.status = 0
		}
		b.unsure = b.unsure || b.status == 0 || b.status == http.StatusServiceUnavailable
		fr.mu.Lock()
		fr.attempts = append(fr.attempts, verify.Attempt{Call: call, Return: b.answered, VU: k, Iteration: int64(k), Kind: "order", Attempt: try,
			Instance: fmt.Sprintf("instance-%d", i), User: user, Key: key, Qty: 1, Status: b.status, Code: b.code, OrderID: b.orderID})
		fr.mu.Unlock()
		if b.status != 0 && b.status != http.StatusTooManyRequests && b.status != http.StatusServiceUnavailable {
			return
		}
		sleepCtx(ctx, p.retryAfter)
	}
}

// count adds the buyers' answers to res: the winners, the losers, those
// served out of arrival order by more than the tolerance, and how long
// each waited.
func (fr *fairRun) count(res *ScenarioResult, units int64) {
	won := func(b fairBuyer) bool { return b.status == http.StatusCreated }
	lost := func(b fairBuyer) bool { return b.status == http.StatusConflict && b.code == verify.SoldOutAnswer }
	late, early := outOfOrder(fr.buyers, int(units), won, lost)
	var winners, losers, others, retried, retries int
	var loserWaits, winnerWaits []time.Duration
	for _, b := range fr.buyers {
		if b.tries > 1 {
			retried++
			retries += b.tries - 1
		}
		wait := b.answered.Sub(b.arrived)
		switch {
		case won(b):
			winners++
			winnerWaits = append(winnerWaits, wait)
		case lost(b):
			losers++
			loserWaits = append(loserWaits, wait)
		default:
			others++
		}
	}
	res.line("  answers: %d bought, %d sold_out, %d other; %d buyers told to come back, %d retries", winners, losers, others, retried, retries)
	res.line("  late winners + early losers at %s: %d + %d = %d", fairTolerance, late, early, late+early)
	res.line("  a loser waits for its answer: p50 %.2fs, p99 %.2fs (a winner: p50 %.2fs, p99 %.2fs)",
		quantile(loserWaits, 0.50).Seconds(), quantile(loserWaits, 0.99).Seconds(), quantile(winnerWaits, 0.50).Seconds(), quantile(winnerWaits, 0.99).Seconds())
}

// outOfOrder counts the buyers served (won) who arrived more than
// fairTolerance after the n-th earliest arrival, the last who should have
// been, and those refused (lost) who arrived more than it before.
func outOfOrder(buyers []fairBuyer, n int, won, lost func(fairBuyer) bool) (late, early int) {
	arrivals := make([]time.Time, len(buyers))
	for i, b := range buyers {
		arrivals[i] = b.arrived
	}
	slices.SortFunc(arrivals, time.Time.Compare)
	last := arrivals[min(n, len(arrivals))-1]
	for _, b := range buyers {
		late += btoi(won(b) && b.arrived.After(last.Add(fairTolerance)))
		early += btoi(lost(b) && b.arrived.Before(last.Add(-fairTolerance)))
	}
	return late, early
}

// quantile returns the q-quantile of ds (nearest rank), 0 when empty.
func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return ds[min(int(q*float64(len(ds))), len(ds)-1)]
}
