package service

import (
	"context"
	"errors"
	"fmt"
)

// Commit says where a transaction committed and what it saw: the
// primary's server id and its binary log position (MariaDB GTIDs) read
// after the COMMIT, in the same round trip. The position covers the
// commit and every commit the transaction read. Zero when the Store does
// not track positions (no replicas configured).
type Commit struct {
	Server int64
	GTIDs  string
}

// Replicas confirms that commits reached enough replicas of the primary
// (mysql.min_replicas): an answer decided on a commit is given only once
// they have it, so that losing the primary's machine loses nothing that
// was acknowledged.
type Replicas interface {
	// Confirm returns nil once enough replicas have c, else, within its
	// own bound (mysql.replica_timeout) or when ctx ends, an error
	// wrapping ErrNotReplicated.
	Confirm(ctx context.Context, c Commit) error
}

// ErrNotReplicated is a commit that enough replicas did not confirm in
// time: it may be lost with the primary. Buyers are told
// ErrOutcomeUnknown; a retry with the same Idempotency-Key finds the
// order or places it once.
var ErrNotReplicated = errors.New("commit not confirmed by enough replicas")

// maxUnconfirmed bounds a SKU worker's committed batches awaiting their
// confirmation: the worker commits the next batch while the previous
// ones wait, and waits itself only past this many.
const maxUnconfirmed = 4

// answer gives each buyer of a committed batch its outcome and publishes
// a sell-out, once the batch's commit is confirmed when replicas are
// asked for (confirmThenAnswer).
func (o *Orders) answer(skuID int64, live []*pending, res BatchResult, begun int64) {
	for i, out := range res.Outcomes {
		live[i].done <- out
	}
	if res.SKU.Stock == 0 {
		o.markSoldOut(skuID, res.SKU.Version, begun)
	}
}

// confirmThenAnswer answers a committed batch once the replicas confirm
// its commit, off the worker's path: nothing decided on an unconfirmed
// commit (a 201, a replay, a refusal, the sell-out mark) is shown before.
// Unconfirmed in time, every buyer of the batch gets ErrOutcomeUnknown.
// A later confirmation covers the earlier commits of the same primary
// (its GTIDs apply in order), so waits overlap instead of queueing.
func (o *Orders) confirmThenAnswer(q *skuQueue, live []*pending, res BatchResult, begun int64) {
	q.unconfirmed <- struct{}{} // at most maxUnconfirmed waiting
	o.workers.Add(1)
	go func() {
		defer o.workers.Done()
		defer func() { <-q.unconfirmed }()
		err := o.cfg.Replicas.Confirm(context.Background(), res.Commit)
		if err == nil {
			o.answer(q.id, live, res, begun)
			return
		}
		created := 0
		for _, out := range res.Outcomes {
			if out.Placed.Created {
				created++
			}
		}
		o.obs.Unconfirmed(created)
		o.log.Warn("orders not confirmed by the replicas: answered outcome_unknown", "sku", q.id,
			"orders", created, "buyers", len(live), "err", err)
		unknown := fmt.Errorf("%w: %w", ErrOutcomeUnknown, err)
		for _, p := range live {
			p.done <- Outcome{Err: unknown}
		}
	}()
}
