package repository

import (
	"context"
	"errors"
	"fmt"

	"github.com/seckill/seckill/service"
)

// refusesARow reports whether err is the database refusing a row one
// request's writes derived: a unique key or CHECK the decision did not
// foresee, or an unstorable value. Retrying the whole batch would meet it
// again.
func refusesARow(err error) bool {
	switch violationOf(err) {
	case violationUnique, violationCheck, violationData:
		return true
	}
	return false
}

// eachAttempts bounds the transactions of one request in commitEach: a
// key inserted by a concurrent writer is found by the second's reads.
const eachAttempts = 2

// oneByOne is what commitEach needs of a store: its transaction of one
// batch, and a read of the SKU with the position it read at (zero when
// positions are not tracked).
type oneByOne interface {
	commitOnce(ctx context.Context, b service.Batch) (service.BatchResult, error)
	skuAtCommit(ctx context.Context, id int64) (service.SKU, service.Commit, error)
}

// commitEach commits b's requests one at a time on s, in arrival order,
// each in its own transaction that reads afresh, so a refused row is
// answered to its request alone (refusedRow). An error that is no
// request's own fails the batch while nothing is written; after that,
// committed orders stand and the rest are answered unavailable.
//
// The result's Commit is the last transaction's position, which covers
// the earlier ones of the same server; when they committed on different
// servers (a failover between two), no one position covers them all and
// it is left zero, which the replicas never confirm.
func commitEach(ctx context.Context, s oneByOne, b service.Batch) (service.BatchResult, error) {
	res := service.BatchResult{Outcomes: make([]service.Outcome, len(b.Requests))}
	wrote, read := false, false
	for i, r := range b.Requests {
		one := b
		one.Requests, one.Known = []service.OrderRequest{r}, nil
		got, out, err := commitOne(ctx, s, one)
		switch {
		case err == nil:
			res.Outcomes[i] = out
			if got != nil {
				res.Commit = lastCommit(res.Commit, got.Commit, read)
				res.SKU, read = got.SKU, true
				wrote = wrote || out.Placed.Created
			}
			continue
		case !wrote:
			return service.BatchResult{}, err
		}
		if !errors.Is(err, service.ErrUnavailable) && !errors.Is(err, service.ErrOutcomeUnknown) {
			err = fmt.Errorf("%w: %w", service.ErrUnavailable, err)
		}
		for j := i; j < len(b.Requests); j++ {
			res.Outcomes[j] = service.Outcome{Err: err}
		}
		return res, nil
	}
	if !read { // every request's row was refused: the SKU is as it was
		sku, at, err := s.skuAtCommit(ctx, b.SKUID)
		if err != nil {
			return service.BatchResult{}, err
		}
		res.SKU, res.Commit = sku, at
	}
	return res, nil
}

// lastCommit is the position that covers prev (when there was one) and
// next: next, if both are of one server; else none.
func lastCommit(prev, next service.Commit, hadPrev bool) service.Commit {
	if hadPrev && prev.Server != next.Server {
		return service.Commit{}
	}
	return next
}

// commitOne commits a batch of one request and returns its result and
// outcome; only the outcome when the database refused its row; or an
// error that is no request's own.
func commitOne(ctx context.Context, s oneByOne, one service.Batch) (*service.BatchResult, service.Outcome, error) {
	for attempt := 1; ; attempt++ {
		res, err := s.commitOnce(ctx, one)
		if err == nil {
			return &res, res.Outcomes[0], nil
		}
		if refusesARow(err) && (violationOf(err) != violationUnique || attempt >= eachAttempts) {
			return nil, service.Outcome{Err: refusedRow(err)}, nil
		}
		if !errors.Is(err, service.ErrConflict) || attempt >= eachAttempts || ctx.Err() != nil {
			return nil, service.Outcome{}, err
		}
	}
}

// refusedRow is the answer to a request whose row the database refused
// though the decision allowed it: the database compares its id or key
// differently, or cannot store it.
func refusedRow(err error) error {
	switch violationOf(err) {
	case violationUnique:
		return fmt.Errorf("%w: the database holds this idempotency key for another order", service.ErrIdempotencyConflict)
	case violationCheck:
		return fmt.Errorf("%w: the database holds this buyer at the sku's limit", service.ErrLimitExceeded)
	}
	return unstorable{}
}

// unstorable is a request with a value the database cannot hold; its
// text is what the client is told.
type unstorable struct{}

func (unstorable) Error() string {
	return "the database cannot store an id or key of this request as sent"
}

func (unstorable) Unwrap() error { return service.ErrInvalid }
