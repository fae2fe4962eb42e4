package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/seckill/seckill/internal/backoff"
	"github.com/seckill/seckill/service"
)

// The road from a batch to its COMMIT: the lease its turn decided
// (hold.go), commitUnder's retries of version conflicts under it, and the
// group commit (rounds.go), which runs the transaction in a round with
// other SKUs' batches when the lock is held.

// commitUnder runs b's transaction with lease's fence (none without a
// lease), retrying version conflicts a bounded number of times. Losing
// the lease meanwhile cancels the transaction. bt, when not nil, traces
// the batch.
func (w *worker) commitUnder(ctx context.Context, b service.Batch, lease Lease, bt *batchTrace) (service.BatchResult, error) {
	b.Fence = 0
	if lease != nil {
		b.Fence = lease.Fence()
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		stop := w.cancelOnLoss(lease, cancel)
		defer stop()
	}
	start := time.Now()
	var (
		res     service.BatchResult
		err     error
		retries int
	)
	for {
		b.Now = time.Now().UTC().Truncate(time.Microsecond) // what the database keeps
		res, err = w.s.rounds.commit(ctx, b, lease != nil, bt)
		if !errors.Is(err, service.ErrConflict) || retries >= w.s.cfg.MaxRetries || ctx.Err() != nil {
			break
		}
		retries++
		b.Known = nil // the row moved: read it
		if lease == nil {
			backoff.Wait(ctx, retries) // unlocked contenders: spread the retries out
		}
	}
	w.s.obs.Batch(len(b.Requests), time.Since(start), retries, err)
	if lease == nil && (!w.soldOut || slices.ContainsFunc(b.Requests, func(r service.OrderRequest) bool { return r.Wait })) {
		w.s.obs.SoldUnlocked(len(b.Requests)) // out of turn: a sale, or waiters joining the line
	}
	if err == nil && b.Known != nil {
		w.s.obs.KnownRow(res.ReadsSkipped)
	}
	return res, err
}

// cancelOnLoss calls cancel if lease is found lost before stop is called.
func (w *worker) cancelOnLoss(lease Lease, cancel context.CancelFunc) (stop func()) {
	lost := lease.Lost()
	if lost == nil {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		select {
		case <-lost:
			w.s.log.Warn("lock lease lost during a batch; aborting it", "sku", w.q.id)
			cancel()
		case <-done:
		}
	}()
	return func() { close(done) }
}

// fail answers every buyer of a failed batch with a true answer: the
// batch committed nothing (or, for ErrOutcomeUnknown, nobody knows).
func (w *worker) fail(live []*pending, err error) {
	skuID := w.q.id
	switch {
	case errors.Is(err, service.ErrSKUNotFound):
		w.s.skus.Forget(skuID) // the database no longer has it
	case errors.Is(err, service.ErrConflict):
		err = fmt.Errorf("%w: too much contention on sku %d: %w", service.ErrUnavailable, skuID, err)
	case errors.Is(err, service.ErrUnavailable), errors.Is(err, service.ErrOutcomeUnknown):
	default:
		w.s.log.Error("order batch failed", "sku", skuID, "size", len(live), "err", err)
		err = fmt.Errorf("%w: %w", service.ErrUnavailable, err)
	}
	for _, p := range live {
		p.done <- service.Outcome{Err: err}
	}
}
