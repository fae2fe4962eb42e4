package verify

import (
	"fmt"
	"hash/maphash"
	"maps"
	"time"

	"github.com/anishathalye/porcupine"
)

// stockState is the model's state, never mutated (a step copies it): the
// remaining stock, the holdings of the users with more than one operation
// (a first purchase starts from zero) and the waiting orders' quantities
// by buyer.
type stockState struct {
	stock   int64
	held    map[string]int64
	waiting map[string]int64
}

// stockInput is an operation as the model sees it.
type stockInput struct {
	op      Op
	tracked bool // the user's holdings are kept in the state
}

var hashSeed = maphash.MakeSeed()

// stockModel is one SKU: a stock counter, per-user holdings up to the
// limit, restocks that set the stock, returns that add to it, and a
// waitlist; a Maybe steps either way.
func stockModel(h History) porcupine.Model {
	nm := porcupine.NondeterministicModel{
		Init: func() []any {
			return []any{stockState{stock: h.InitialStock, held: map[string]int64{}, waiting: map[string]int64{}}}
		},
		Step: func(st, in, _ any) []any { return stockStep(h.PerUserLimit, st.(stockState), in.(stockInput)) },
		Equal: func(a, b any) bool {
			x, y := a.(stockState), b.(stockState)
			return x.stock == y.stock && maps.Equal(x.held, y.held) && maps.Equal(x.waiting, y.waiting)
		},
		Hash: func(st any) uint64 {
			s := st.(stockState)
			sum := uint64(s.stock)
			for u, n := range s.held {
				sum += maphash.String(hashSeed, u) * uint64(n)
			}
			for u, n := range s.waiting {
				sum += maphash.String(hashSeed, u) * uint64(n) * 31
			}
			return sum
		},
		DescribeOperation: func(in, _ any) string {
			op := in.(stockInput).op
			switch op.Kind {
			case Restock:
				return fmt.Sprintf("restock(%d)", op.Stock)
			case Returned, Allotted, Left:
				return fmt.Sprintf("%s %s %d", op.User, op.Kind, op.Qty)
			}
			return fmt.Sprintf("%s buys %d → %s @%s", op.User, op.Qty, op.Kind, op.Instance)
		},
		DescribeState: func(st any) string {
			s := st.(stockState)
			return fmt.Sprintf("stock %d, %d waiting", s.stock, len(s.waiting))
		},
	}
	return nm.ToModel()
}

// stockStep is the model's transition: the states op may lead s to,
// none when op's answer is impossible in s.
func stockStep(limit int64, s stockState, in stockInput) []any {
	op := in.op
	held := s.holding(in)
	withinLimit := limit <= 0 || held+op.Qty <= limit
	// A unit is never free while a waiter it fits waits (invariant 20):
	// a buyer who does not wait takes it only when no waiter could.
	canTake := s.stock >= op.Qty && withinLimit && !s.waiterFits()
	switch op.Kind {
	case Restock:
		return []any{stockState{stock: op.Stock, held: s.held, waiting: s.waiting}}
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
	case Waited:
		if s.stock < op.Qty && withinLimit {
			return []any{s.moved(in, 0, op.Qty).waits(op.User, op.Qty)}
		}
	case Allotted:
		if s.waiting[op.User] == op.Qty && s.stock >= op.Qty {
			return []any{s.moved(in, -op.Qty, 0).waits(op.User, 0)}
		}
	case Left:
		if s.waiting[op.User] == op.Qty {
			return []any{s.moved(in, 0, -op.Qty).waits(op.User, 0)}
		}
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

// waiterFits reports whether a waiting order fits the stock in s.
func (s stockState) waiterFits() bool {
	for _, q := range s.waiting {
		if q <= s.stock {
			return true
		}
	}
	return false
}

// waits is s with user's waiting order of qty (0: none): a copy.
func (s stockState) waits(user string, qty int64) stockState {
	s.waiting = maps.Clone(s.waiting)
	if qty == 0 {
		delete(s.waiting, user)
	} else {
		s.waiting[user] = qty
	}
	return s
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
	n := stockState{stock: s.stock + units, held: s.held, waiting: s.waiting}
	if in.tracked {
		n.held = maps.Clone(s.held)
		n.held[in.op.User] = s.held[in.op.User] + held
	}
	return n
}

// porcupineOps converts h for Porcupine: nanoseconds on one clock, a
// sold_out's invocation moved back by the bound, each user tracked only
// with more than one operation.
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
		switch op.Kind {
		case Restock, Returned, Allotted, Left:
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
