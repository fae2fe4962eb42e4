package verify

import (
	"fmt"
	"hash/maphash"
	"maps"
	"time"

	"github.com/anishathalye/porcupine"
)

// stockState is the model's state: the remaining stock and the holdings
// of the users with more than one operation (a user's first purchase
// starts from zero, so only repeat buyers need remembering). It is never
// mutated: a step that changes it copies it.
type stockState struct {
	stock int64
	held  map[string]int64
}

// stockInput is an operation as the model sees it.
type stockInput struct {
	op      Op
	tracked bool // the user's holdings are kept in the state
}

var hashSeed = maphash.MakeSeed()

// stockModel is one SKU: a stock counter, per-user holdings up to the
// limit, restocks that set the remaining stock and returned orders that
// add theirs back (and leave their buyer's holdings). Outcomes that may or
// may not have happened (Maybe) step either way.
func stockModel(h History) porcupine.Model {
	nm := porcupine.NondeterministicModel{
		Init: func() []any { return []any{stockState{stock: h.InitialStock, held: map[string]int64{}}} },
		Step: func(st, in, _ any) []any { return stockStep(h.PerUserLimit, st.(stockState), in.(stockInput)) },
		Equal: func(a, b any) bool {
			x, y := a.(stockState), b.(stockState)
			return x.stock == y.stock && maps.Equal(x.held, y.held)
		},
		Hash: func(st any) uint64 {
			s := st.(stockState)
			sum := uint64(s.stock)
			for u, n := range s.held {
				sum += maphash.String(hashSeed, u) * uint64(n)
			}
			return sum
		},
		DescribeOperation: func(in, _ any) string {
			op := in.(stockInput).op
			switch op.Kind {
			case Restock:
				return fmt.Sprintf("restock(%d)", op.Stock)
			case Returned:
				return fmt.Sprintf("%s returns %d", op.User, op.Qty)
			}
			return fmt.Sprintf("%s buys %d → %s @%s", op.User, op.Qty, op.Kind, op.Instance)
		},
		DescribeState: func(st any) string {
			s := st.(stockState)
			return fmt.Sprintf("stock %d", s.stock)
		},
	}
	return nm.ToModel()
}

// stockStep is the model's transition: the states op may lead s to,
// none when op's answer is impossible in s.
func stockStep(limit int64, s stockState, in stockInput) []any {
	op := in.op
	held := s.holding(in)
	canTake := s.stock >= op.Qty && (limit <= 0 || held+op.Qty <= limit)
	switch op.Kind {
	case Restock:
		return []any{stockState{stock: op.Stock, held: s.held}}
	case Returned:
		return []any{s.moved(in, op.Qty, -op.Qty)}
	case Bought:
		if canTake {
			return []any{s.moved(in, -op.Qty, op.Qty)}
		}
	case Maybe:
		if canTake {
			return []any{s, s.moved(in, -op.Qty, op.Qty)}
		}
		return []any{s}
	case SoldOutAnswer:
		if s.stock < op.Qty {
			return []any{s}
		}
	case LimitAnswer:
		if limit > 0 && held+op.Qty > limit {
			return []any{s}
		}
	}
	return nil
}

// holding is what the operation's buyer holds in s: 0 for a buyer whose
// holdings are not tracked (its first and only operation).
func (s stockState) holding(in stockInput) int64 {
	if in.tracked {
		return s.held[in.op.User]
	}
	return 0
}

// moved is s with the stock changed by units and, when tracked, the
// buyer's holdings by held: a copy, s is never mutated.
func (s stockState) moved(in stockInput, units, held int64) stockState {
	n := stockState{stock: s.stock + units, held: s.held}
	if in.tracked {
		n.held = maps.Clone(s.held)
		n.held[in.op.User] = s.held[in.op.User] + held
	}
	return n
}

// porcupineOps converts h for Porcupine: nanoseconds on one clock, a
// sold_out's invocation moved back by the bound (the only staleness the
// model accepts), each user tracked only if it has more than one
// operation.
func porcupineOps(h History, bound time.Duration) []porcupine.Operation {
	count := map[string]int{}
	maxClient := 0
	for _, op := range h.Ops {
		if op.Kind != Restock {
			count[op.User]++
		}
		maxClient = max(maxClient, op.Client)
	}
	ops := make([]porcupine.Operation, 0, len(h.Ops))
	for _, op := range h.Ops {
		call := op.Call
		if op.Kind == SoldOutAnswer {
			call = call.Add(-bound)
		}
		client := op.Client
		if op.Kind == Restock || op.Kind == Returned {
			client = maxClient + 1
		}
		ops = append(ops, porcupine.Operation{
			ClientId: client,
			Input:    stockInput{op: op, tracked: op.Kind != Restock && count[op.User] > 1},
			Call:     call.UnixNano(),
			Return:   op.Return.UnixNano(),
		})
	}
	return ops
}
