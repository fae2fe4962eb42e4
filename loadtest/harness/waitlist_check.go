package harness

import (
	"context"
	"net/http"
	"slices"
	"time"

	"github.com/seckill/seckill/loadtest/verify"
)

// check holds the run to the waitlist's own checks (loadtest/README.md)
// and to the sale's.
func (w *waitRun) check(ctx context.Context, res *ScenarioResult) error {
	snap, err := verify.FromDB(ctx, w.db, w.skuID)
	if err != nil {
		return err
	}
	orders := snap.ByID()
	answers := map[int]int{}
	for _, b := range w.holders.buyers {
		if b.status != http.StatusCreated {
			res.bad("a holder was answered %d %s, not 201: the first act sells its units to as many buyers", b.status, b.code)
		}
	}
	joined := 0
	for _, b := range w.waiters.buyers {
		answers[b.status]++
		joined += btoi(b.joined())
	}
	res.line("  waiters' answers: %v (status: count)", answers)
	if joined != waitBuyers {
		res.bad("%d of %d waiters were told they wait (202, or 200 for a retry)", joined, waitBuyers)
	}
	w.checkAllocations(res, orders)
	w.checkPositions(res)
	w.checkHeard(res, orders)
	if w.freeWhileWaiting != "" {
		res.bad("once the units had come back: %s", w.freeWhileWaiting)
	}
	w.addHistory(snap.Orders)
	return w.checkAnswers(ctx, res, waitHolders, clientsOf(w.holders, w.waiters), append(w.holders.attempts, w.waiters.attempts...))
}

// checkAllocations holds the K waiters given units to the K earliest,
// within fairTolerance; without a fault K is every unit that came back,
// each paid, and every other waiter lapsed.
func (w *waitRun) checkAllocations(res *ScenarioResult, orders map[int64]verify.Order) {
	given, lapsed, paid := 0, 0, 0
	var firstPassed, lastGiven time.Time // arrivals: the earliest waiter passed over, the latest given units
	for _, b := range w.waiters.buyers {
		o := orders[b.orderID]
		given += btoi(o.AllocatedAt != nil)
		lapsed += btoi(o.Status == "lapsed")
		paid += btoi(o.Status == "paid")
		if o.AllocatedAt != nil && b.arrived.After(lastGiven) {
			lastGiven = b.arrived
		} else if o.AllocatedAt == nil && (firstPassed.IsZero() || b.arrived.Before(firstPassed)) {
			firstPassed = b.arrived
		}
	}
	res.line("  waiters given units: %d (%d paid), lapsed: %d", given, paid, lapsed)
	want := waitCancels + (waitHolders - waitCancels - waitPays) + waitRestock
	if w.cfg.Fault == FaultNone && (given != want || paid != want || lapsed != waitBuyers-want) {
		res.bad("%d units came back, to be given to as many waiters and paid: %d were given, %d paid, %d lapsed of %d", want, given, paid, lapsed, waitBuyers)
	}
	if given == 0 {
		return
	}
	allotted := func(b fairBuyer) bool { return orders[b.orderID].AllocatedAt != nil }
	late, early := outOfOrder(w.waiters.buyers, given, allotted, func(b fairBuyer) bool { return !allotted(b) })
	var inversion time.Duration // how much later than one passed over the last given arrived
	if !firstPassed.IsZero() {
		inversion = max(lastGiven.Sub(firstPassed), 0)
	}
	res.line("  given out of arrival order: late %d, early %d at %s; largest inversion %.1fms", late, early, fairTolerance, float64(inversion.Microseconds())/1000)
	if late+early > 0 {
		res.bad("units went out of arrival order beyond %s: %d late, %d earlier waiters passed over", fairTolerance, late, early)
	}
}

// checkPositions holds each waiter's position to the waiters that arrived
// before it, within fairTolerance.
func (w *waitRun) checkPositions(res *ScenarioResult) {
	arrivals := make([]time.Time, 0, waitBuyers)
	for _, b := range w.waiters.buyers {
		arrivals = append(arrivals, b.arrived)
	}
	slices.SortFunc(arrivals, time.Time.Compare)
	before := func(t time.Time) int64 {
		i, _ := slices.BinarySearchFunc(arrivals, t, time.Time.Compare)
		return int64(i)
	}
	off, worst := 0, int64(0)
	for _, b := range w.waiters.buyers {
		rank := before(b.arrived)
		worst = max(worst, b.position-rank, rank-b.position)
		if b.position < before(b.arrived.Add(-fairTolerance)) || b.position > before(b.arrived.Add(fairTolerance)) {
			off++
		}
	}
	res.line("  positions: %d beyond the waiters that arrived within %s of the waiter; largest |position - rank| %d", off, fairTolerance, worst)
	if off > 0 {
		res.bad("%d waiters were told a position other than the waiters that arrived before them (within %s)", off, fairTolerance)
	}
}

// checkHeard measures how long after its allocation's commit each waiter
// heard of it on its long-poll.
func (w *waitRun) checkHeard(res *ScenarioResult, orders map[int64]verify.Order) {
	var heard []time.Duration
	missed := 0
	for k, b := range w.waiters.buyers {
		o, h := orders[b.orderID], w.heard[k]
		switch {
		case o.AllocatedAt == nil:
		case h.allocated.IsZero():
			missed++
		default:
			heard = append(heard, h.allocated.Sub(*o.AllocatedAt))
		}
		if h.final != "" && h.final != o.Status {
			res.bad("waiter %d last read its order %s; the database has it %s", k, h.final, o.Status)
		}
	}
	res.line("  a waiter's long-poll on instance(s) %v, no unit returned through them, heard of its allocation", w.pollOn)
	share := 100 * w.heardWithin / max(w.heardAll, 1)
	res.line("    after the returning COMMIT (the instances' seckill_long_poll_heard_seconds): %.1f%% of %.0f within %s (goal: p99, 99%%)",
		share, w.heardAll, waitHeardGoal)
	res.line("    after allocated_at, read by the buyer (+ the returning transaction's wait for the SKU's row): p50 %.1fms, p99 %.1fms, max %.1fms; %d never heard it pending",
		msf(quantile(heard, 0.5)), msf(quantile(heard, 0.99)), msf(quantile(heard, 1)), missed)
	if w.cfg.Fault == FaultNone && (share < 99 || w.heardAll < float64(len(heard)) || missed > 0) {
		res.bad("waiters heard of their allocation %.1f%% within %s (goal 99%%), %.0f heard of %d given, %d never heard it", share, waitHeardGoal, w.heardAll, len(heard), missed)
	}
}

// addHistory gives the history what the database did beside the answers
// (databaseOps); a cancel never answered returned its unit by the end.
func (w *waitRun) addHistory(orders []verify.Order) {
	end := time.Now() // after every answer and every sweep
	for i, op := range w.restocks.ops {
		if op.Kind == verify.Returned && op.Status != http.StatusOK && op.Status != http.StatusConflict {
			w.restocks.ops[i].Return = end
		}
	}
	w.restocks.ops = append(w.restocks.ops, databaseOps(orders)...)
}

func msf(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
