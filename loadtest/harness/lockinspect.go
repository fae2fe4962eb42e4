package harness

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/seckill/seckill/loadtest/verify"
	"github.com/seckill/seckill/lock/locktest"
)

const (
	lockSampleEvery = 100 * time.Millisecond
	lockMaxSamples  = 5000             // answers kept in the count; polling stops past it
	lockMaxSKUs     = 3                // SKUs sampled of a sale spread over many
	lockMaxChanges  = 64               // holder changes kept for the report
	lockMaxProblems = 20               // violations kept; the rest are counted
	lockTokenMax    = 8                // the longest token prefix the API may show
	lockIdleWait    = 20 * time.Second // past lock.hold_idle (1s) and an abandoned lease's lock.ttl
)

// LockInspection is what the inspection API showed during and after the sale.
type LockInspection struct {
	Samples    int          `json:"samples"`
	Held       int          `json:"held"`
	Errors     int          `json:"errors"` // requests refused or unanswered (an instance down in a fault)
	Holders    int          `json:"holders"`
	Changes    []LockChange `json:"holder_changes,omitempty"` // the first lockMaxChanges
	Increasing bool         `json:"fences_increasing"`
	Grew       int          `json:"fences_grew"` // holder changes whose fence was above the last's: Increasing's evidence
	Idle       string       `json:"idle"`        // the after-sale answer: free, or what held on
	Problems   []string     `json:"problems,omitempty"`

	owners  map[string]bool
	last    map[string]LockChange // the last holder by view: the SKU, or instance and SKU (see add)
	dropped int
	fenced  bool // a held answer showed a fence above 0
}

// LockChange is a holder of a SKU's lock, as an answer showed it, and its fence.
type LockChange struct {
	SKU   int64  `json:"sku"`
	Owner string `json:"owner"`
	Token string `json:"token"`
	Fence int64  `json:"fence"`
}

// lockAnswer is the part of the API's LockJSON the sampler checks.
type lockAnswer struct {
	Held        bool   `json:"held"`
	Owner       string `json:"owner"`
	Token       string `json:"token"`
	Fence       string `json:"fence"`
	LeaseLeftMS int64  `json:"lease_left_ms"`
	Renewed     bool   `json:"renewed"`
}

func newLockInspection() *LockInspection {
	return &LockInspection{Increasing: true, owners: map[string]bool{}, last: map[string]LockChange{}}
}

func (li *LockInspection) problem(format string, args ...any) {
	if len(li.Problems) < lockMaxProblems {
		li.Problems = append(li.Problems, fmt.Sprintf(format, args...))
	} else {
		li.dropped++
	}
}

// add checks one answer for sku; view names whose answers must show
// fences that never decrease: the SKU on Redis, the instance and SKU on
// ZooKeeper, whose followers may answer one session behind another.
func (li *LockInspection) add(view string, sku int64, a lockAnswer) {
	li.Samples++
	if !a.Held {
		return
	}
	li.Held++
	if a.Owner == "" {
		li.problem("sku %d: held with no owner", sku)
	}
	if a.Token == "" || len(a.Token) > lockTokenMax {
		li.problem("sku %d: held by %q showing a token of %d characters, want a prefix of 1 to %d", sku, a.Owner, len(a.Token), lockTokenMax)
	}
	fence, err := strconv.ParseInt(a.Fence, 10, 64)
	if err != nil {
		li.problem("sku %d: fence %q is not a number", sku, a.Fence)
		return
	}
	li.owners[a.Owner] = true
	li.fenced = li.fenced || fence > 0
	prev, seen := li.last[view]
	cur := LockChange{SKU: sku, Owner: a.Owner, Token: a.Token, Fence: fence}
	li.last[view] = cur
	newHolder := !seen || prev.Owner != cur.Owner || prev.Token != cur.Token
	if newHolder && len(li.Changes) < lockMaxChanges {
		li.Changes = append(li.Changes, cur)
	}
	if seen {
		li.follows(view, sku, prev, cur, newHolder)
	}
}

// follows checks the fence of cur, seen in view after prev: it never
// decreases, and a new holder's is above its predecessor's (but 0: a store
// that keeps none, Redlock).
func (li *LockInspection) follows(view string, sku int64, prev, cur LockChange, newHolder bool) {
	switch {
	case cur.Fence < prev.Fence:
		li.Increasing = false
		li.problem("sku %d (%s): fence %d of %s/%s after %d of %s/%s: it decreased", sku, view, cur.Fence, cur.Owner, cur.Token, prev.Fence, prev.Owner, prev.Token)
	case newHolder && cur.Fence > 0 && cur.Fence == prev.Fence:
		li.Increasing = false
		li.problem("sku %d (%s): new holder %s/%s with the fence %d of %s/%s", sku, view, cur.Owner, cur.Token, cur.Fence, prev.Owner, prev.Token)
	case newHolder && cur.Fence > prev.Fence:
		li.Grew++
	}
}

// String is the summary's line.
func (li *LockInspection) String() string {
	inc := fmt.Sprintf("yes (%d holder changes seen, each fence above the last)", li.Grew)
	switch {
	case !li.Increasing:
		inc = "no"
	case li.Held > 0 && !li.fenced:
		inc = "no fences shown (the store keeps none: Redlock)"
	case li.Grew == 0:
		inc = "not seen (no two holders in a row)"
	}
	s := fmt.Sprintf("%d samples, %d held, %d holders, fences increasing: %s; after the sale: %s",
		li.Samples, li.Held, li.Holders, inc, li.Idle)
	if li.Errors > 0 {
		s += fmt.Sprintf("; %d requests failed", li.Errors)
	}
	return s
}

func (li *LockInspection) violations() []verify.Violation {
	ps := li.Problems
	if li.dropped > 0 {
		ps = append(slices.Clip(ps), fmt.Sprintf("%d more problems", li.dropped))
	}
	return violationsOf(LockInspectionFailed, ps...)
}

// sampleLocks polls the inspection API of every instance every 100ms
// until ctx ends or lockMaxSamples answers, one request at a time, so
// that a later answer never precedes an earlier one.
func (r *run) sampleLocks(ctx context.Context, li *LockInspection) {
	tick := time.NewTicker(lockSampleEvery)
	defer tick.Stop()
	for li.Samples+li.Errors < lockMaxSamples {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		r.lockRound(ctx, li)
	}
}

// lockRound reads and checks the lock of every sampled SKU at every
// instance once, and describes those held or unread.
func (r *run) lockRound(ctx context.Context, li *LockInspection) (held []string) {
	for _, base := range r.baseURLs {
		for _, sku := range r.skuIDs[:min(len(r.skuIDs), lockMaxSKUs)] {
			var a lockAnswer
			rctx, cancel := context.WithTimeout(ctx, time.Second)
			err := r.admin(rctx, http.MethodGet, fmt.Sprintf("%s/admin/v1/skus/%d/lock", base, sku), "", http.StatusOK, &a)
			cancel()
			switch {
			case ctx.Err() != nil:
				return append(held, ctx.Err().Error())
			case err != nil:
				li.Errors++
				held = append(held, fmt.Sprintf("sku %d at %s: %v", sku, base, err))
				continue
			}
			view := fmt.Sprintf("sku %d", sku)
			if r.cfg.Lock == LockZooKeeper {
				view = base + " " + view
			}
			li.add(view, sku, a)
			if a.Held {
				held = append(held, fmt.Sprintf("sku %d held by %s/%s (fence %s, lease left %dms, renewed %t)",
					sku, a.Owner, a.Token, a.Fence, a.LeaseLeftMS, a.Renewed))
			}
		}
	}
	return held
}

// finishLocks waits, bounded, for every sampled lock to be free, checking
// each answer (not in target mode, where other traffic may hold it), and
// logs the inspection's line.
func (r *run) finishLocks(ctx context.Context, li *LockInspection) {
	li.Idle = "not checked (target mode: other traffic may hold it)"
	if !r.cfg.Target {
		start := time.Now()
		var held []string
		err := locktest.Poll(ctx, "every lock free", lockIdleWait, 250*time.Millisecond, func(context.Context) error {
			if held = r.lockRound(ctx, li); len(held) > 0 {
				return errors.New("held")
			}
			return nil
		})
		li.Idle = fmt.Sprintf("free (after %.1fs)", time.Since(start).Seconds())
		if err != nil {
			li.Idle = "still held"
			li.problem("%s after the sale: %s", lockIdleWait, strings.Join(held, "; "))
		}
	}
	li.Holders = len(li.owners)
	r.event("lock inspection: %s", li)
}
