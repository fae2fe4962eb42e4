package harness

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/seckill/seckill/loadtest/verify"
)

// The first-come-first-served run (-scenario fair): distinct buyers, one
// unit each, arrive evenly spread over fairOver, round-robin over the
// instances. A buyer told 429 or 503 waits Retry-After and sends the same
// request with the same Idempotency-Key to the next instance, as a
// well-behaved client does. The run then counts the buyers served out of
// arrival order by more than fairTolerance.
const (
	fairOver      = time.Second
	fairTolerance = 100 * time.Millisecond
)

// FairResult is what a fair run found. A late winner bought although it
// arrived more than Tolerance after the last buyer who should have won
// (the Units-th arrival); an early loser arrived more than Tolerance
// before that buyer and was refused sold_out.
type FairResult struct {
	Instances                    int
	Units                        int64
	Buyers                       int
	Over, Tolerance              time.Duration
	Env                          []string
	Winners, Losers, Others      int
	Retried, Retries             int // buyers told to come back, and their retries
	LateWinners, EarlyLosers     int
	Unlocked                     int // orders the instances sold without the lock: not promised in order
	LoserWaitP50, LoserWaitP99   time.Duration
	WinnerWaitP50, WinnerWaitP99 time.Duration
	Elapsed                      time.Duration
	Stock, Sold                  int64
	History                      verify.HistoryVerdict
	Dir                          string
	Violations                   []string
}

// Pass reports whether every answer was true: fairness itself is measured
// and printed, not judged, since the bound depends on the settings.
func (r FairResult) Pass() bool { return len(r.Violations) == 0 }

// WriteText prints the result.
func (r FairResult) WriteText(w io.Writer) {
	env := "defaults"
	if len(r.Env) > 0 {
		env = strings.Join(r.Env, " ")
	}
	fmt.Fprintf(w, "fair: %d units, %d buyers over %s, %d instance(s), %s (%.1fs)\n", r.Units, r.Buyers, r.Over, r.Instances, env, r.Elapsed.Seconds())
	fmt.Fprintf(w, "  answers: %d bought, %d sold_out, %d other; %d buyers told to come back, %d retries\n", r.Winners, r.Losers, r.Others, r.Retried, r.Retries)
	fmt.Fprintf(w, "  late winners + early losers at %s: %d + %d = %d\n", r.Tolerance, r.LateWinners, r.EarlyLosers, r.LateWinners+r.EarlyLosers)
	fmt.Fprintf(w, "  orders sold without the lock (degraded, in one instance's order): %d\n", r.Unlocked)
	fmt.Fprintf(w, "  a loser waits for its answer: p50 %.2fs, p99 %.2fs (a winner: p50 %.2fs, p99 %.2fs)\n",
		r.LoserWaitP50.Seconds(), r.LoserWaitP99.Seconds(), r.WinnerWaitP50.Seconds(), r.WinnerWaitP99.Seconds())
	fmt.Fprintf(w, "  sku: stock %d, sold %d\n", r.Stock, r.Sold)
	fmt.Fprintf(w, "  history: %s\n", r.History)
	fmt.Fprintf(w, "  results: %s\n", r.Dir)
	writeVerdict(w, r.Violations)
}

// fairBuyer is one buyer's first arrival and final answer.
type fairBuyer struct {
	arrived, answered time.Time
	status            int
	code              string
	tries             int
}

// maxFairTries bounds each buyer's attempts.
const maxFairTries = 20

// RunFair starts the database, a private Redis and cfg's instances, sends
// the buyers (default 12,000) for a SKU of units (default 3,000) and counts
// who was served out of arrival order. cfg.Env goes to every instance.
func RunFair(ctx context.Context, cfg Config, units int64, buyers int) (res FairResult, err error) {
	orDefault(&units, 3000)
	orDefault(&buyers, 12000)
	if int64(buyers) <= units {
		return res, fmt.Errorf("the buyers (%d) must outnumber the units (%d): the run measures who loses", buyers, units)
	}
	base, err := scenarioConfig(cfg, append([]string{"SECKILL_AUTH_SHOPPER=none"}, cfg.Env...)...) // buyers are named in the body
	if err != nil {
		return res, err
	}
	r, err := startScenario(ctx, base, "fair", fairConnsPerInstance) // every buyer may wait at once
	defer r.tearDown()
	res.Dir = r.dir
	if err != nil {
		return res, err
	}
	res.Instances, res.Units, res.Buyers, res.Over, res.Tolerance, res.Env = base.Instances, units, buyers, fairOver, fairTolerance, cfg.Env
	if r.skuID, err = r.createSKU(ctx, "fair", units, 1); err != nil {
		return res, err
	}
	r.skuIDs = []int64{r.skuID}
	fr := &fairRun{run: r, history: newGoHistory(), buyers: make([]fairBuyer, buyers)}
	fr.warm(ctx, min(buyers/base.Instances+1, fairConnsPerInstance))
	r.event("fair: %d buyers over %s", buyers, fairOver)
	start := time.Now()
	fr.send(ctx, fairOver)
	res.Elapsed = time.Since(start)
	if err := ctx.Err(); err != nil {
		return res, err
	}
	fr.count(&res)
	res.Unlocked = fr.soldUnlocked(ctx)
	return res, fr.check(ctx, &res)
}

// soldUnlocked sums seckill_orders_unlocked_total over the instances (a
// scrape that fails counts nothing: the run's answers are what it judges).
func (fr *fairRun) soldUnlocked(ctx context.Context) int {
	var n float64
	for i := range fr.baseURLs {
		if v, _, err := fr.metric(ctx, i, "seckill_orders_unlocked_total "); err == nil {
			n += v
		}
	}
	return int(n)
}

// check reads what was sold and checks the answers: as many winners as
// units, every answer linearizable, the audit clean.
func (fr *fairRun) check(ctx context.Context, res *FairResult) (err error) {
	if err := fr.db.QueryRowContext(ctx, "SELECT stock, sold FROM skus WHERE id = ?", fr.skuID).Scan(&res.Stock, &res.Sold); err != nil {
		return err
	}
	if res.Sold != res.Units || int64(res.Winners) != res.Sold {
		res.Violations = append(res.Violations, fmt.Sprintf("sold %d and %d buyers told they bought; want %d of each", res.Sold, res.Winners, res.Units))
	}
	if res.History, err = fr.checkGoHistory(ctx, fr.history, fr.skuID, res.Units, 1, res.Stock); err != nil {
		return err
	}
	res.Violations = append(res.Violations, historyViolations(res.History)...)
	res.Violations = append(res.Violations, fr.audit(ctx)...)
	return nil
}

// fairRun is the state of one fair run.
type fairRun struct {
	*run
	history *goHistory
	buyers  []fairBuyer
}

// fairConnsPerInstance bounds the connections the client keeps open to
// each instance.
const fairConnsPerInstance = 12000

// warm opens n connections to every instance before the sale, so that
// buyers do not each dial one: a dial on a busy box can take longer than
// the tolerance, and would reorder the arrivals before the service sees
// them.
func (fr *fairRun) warm(ctx context.Context, n int) {
	var wg sync.WaitGroup
	for _, url := range fr.baseURLs {
		for range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/healthz", nil)
				if err != nil {
					return
				}
				if resp, err := fr.client.Do(req); err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			}()
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
		wg.Add(1)
		go func() {
			defer wg.Done()
			fr.buy(ctx, k)
		}()
	}
	wg.Wait()
}

// buy sends buyer k's order until it gets an answer other than "come back
// later", waiting Retry-After between tries, each try at the next instance.
func (fr *fairRun) buy(ctx context.Context, k int) {
	b := &fr.buyers[k]
	user := fmt.Sprintf("fair-%d", k)
	key := "fair-key-" + strconv.Itoa(k)
	b.arrived = time.Now()
	for try := 0; try < maxFairTries && ctx.Err() == nil; try++ {
		i := (k + try) % len(fr.baseURLs)
		call := time.Now()
		p, err := fr.order(ctx, fr.baseURLs[i], user, "", key)
		a := p.answer()
		id, _ := fr.orderIDs.Decode(a.OrderID)
		fr.history.order(k, fmt.Sprintf("instance-%d", i), user, call, time.Now(), p.status, a.Error.Code, id, err)
		b.tries++
		b.status, b.code, b.answered = p.status, a.Error.Code, time.Now()
		if err == nil && p.status != http.StatusTooManyRequests && p.status != http.StatusServiceUnavailable {
			return
		}
		sleepCtx(ctx, p.retryAfter)
	}
}

// count fills res from the buyers' answers: the winners, the losers, and
// those served out of arrival order by more than the tolerance.
func (fr *fairRun) count(res *FairResult) {
	order := make([]int, len(fr.buyers))
	for k := range order {
		order[k] = k
	}
	slices.SortFunc(order, func(a, b int) int { return fr.buyers[a].arrived.Compare(fr.buyers[b].arrived) })
	last := fr.buyers[order[min(int(res.Units), len(order))-1]].arrived // the last who should win
	var loserWaits, winnerWaits []time.Duration
	for _, b := range fr.buyers {
		if b.tries > 1 {
			res.Retried++
			res.Retries += b.tries - 1
		}
		wait := b.answered.Sub(b.arrived)
		switch {
		case b.status == http.StatusCreated:
			res.Winners++
			winnerWaits = append(winnerWaits, wait)
			if b.arrived.After(last.Add(res.Tolerance)) {
				res.LateWinners++
			}
		case b.status == http.StatusConflict && b.code == verify.SoldOutAnswer:
			res.Losers++
			loserWaits = append(loserWaits, wait)
			if b.arrived.Before(last.Add(-res.Tolerance)) {
				res.EarlyLosers++
			}
		default:
			res.Others++
		}
	}
	res.LoserWaitP50, res.LoserWaitP99 = quantile(loserWaits, 0.50), quantile(loserWaits, 0.99)
	res.WinnerWaitP50, res.WinnerWaitP99 = quantile(winnerWaits, 0.50), quantile(winnerWaits, 0.99)
}

// quantile returns the q-quantile of ds (nearest rank), 0 when empty.
func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return ds[min(int(q*float64(len(ds))), len(ds)-1)]
}
