package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/seckill/seckill/service"
)

// maxUnconfirmed bounds a SKU worker's committed batches awaiting their
// confirmation: the worker commits the next batch while the previous
// ones wait, and waits itself only past this many.
const maxUnconfirmed = 4

// answer gives each buyer of a committed batch its outcome and publishes
// a sell-out, once the batch's commit is confirmed when replicas are
// asked for (confirmThenAnswer).
func (w *worker) answer(live []*pending, res service.BatchResult, begun int64) {
	for i, out := range res.Outcomes {
		live[i].done <- out
	}
	if res.SKU.Stock == 0 {
		w.s.skus.MarkSoldOut(w.q.id, res.SKU.Version, begun)
	}
	if res.SKU.Waiters > 0 {
		w.s.obs.Waiters(w.q.id, res.SKU.Waiters)
	}
}

// confirmThenAnswer answers a committed batch once the replicas confirm
// its commit, off the worker's path: nothing decided on an unconfirmed
// commit (a 201, a replay, a refusal, the sell-out mark) is shown before.
// Unconfirmed in time, every buyer of the batch gets ErrOutcomeUnknown.
// A later confirmation covers the earlier commits of the same primary
// (its GTIDs apply in order), so waits overlap instead of queueing.
//
// bt, when not nil, traces the batch: its steps end with the wait.
func (w *worker) confirmThenAnswer(live []*pending, res service.BatchResult, begun int64, bt *batchTrace) {
	q := w.q
	var committed time.Time
	if bt != nil {
		committed = time.Now()
	}
	q.unconfirmed <- struct{}{} // at most maxUnconfirmed waiting
	w.s.queues.workers.Add(1)
	go func() {
		defer w.s.queues.workers.Done()
		defer func() { <-q.unconfirmed }()
		var from time.Time
		if bt != nil {
			from = time.Now()
		}
		err := w.s.cfg.Replicas.Confirm(context.Background(), res.Commit)
		if bt != nil {
			bt.finish(live, res, committed, nil, &Step{Kind: StepReplicas, From: from, To: time.Now(), Err: err})
		}
		if err == nil {
			w.answer(live, res, begun)
			return
		}
		created := 0
		for _, out := range res.Outcomes {
			if out.Placed.Created {
				created++
			}
		}
		w.s.obs.Unconfirmed(created)
		w.s.log.Warn("orders not confirmed by the replicas: answered outcome_unknown", "sku", q.id,
			"orders", created, "buyers", len(live), "err", err)
		unknown := fmt.Errorf("%w: %w", service.ErrOutcomeUnknown, err)
		for _, p := range live {
			p.done <- service.Outcome{Err: unknown}
		}
	}()
}
