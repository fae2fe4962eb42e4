package verify

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Attempt is one HTTP order request as the load generator recorded it.
// The k6 scripts write one console line per request (lib.js, history):
//
//	hist <call ms> <return ms> <vu> <iteration> <call> <attempt> <instance> <user> <key|-> <qty> <status> <code|-> <order id|->
//
// Times are k6's Date.now(), milliseconds.
type Attempt struct {
	Call, Return time.Time
	VU           int
	Iteration    int64
	Kind         string // order (a purchase and its retries, one key), replay (the key again after a 201), conflict (the key with another body)
	Attempt      int
	Instance     string
	User         string
	Key          string
	Qty          int64
	Status       int
	Code         string
	OrderID      int64
	OrderRef     string // the opaque order id the buyer was told, for the caller to decode into OrderID
}

// ParseAttempt parses one history line (see Attempt).
func ParseAttempt(line string) (Attempt, error) {
	var a Attempt
	var call, ret int64
	var id string
	if f := strings.Fields(line); len(f) != 14 {
		return a, fmt.Errorf("history: not a record: %q", line)
	}
	if _, err := fmt.Sscanf(line, "hist %d %d %d %d %s %d %s %s %s %d %d %s %s", &call, &ret, &a.VU, &a.Iteration,
		&a.Kind, &a.Attempt, &a.Instance, &a.User, &a.Key, &a.Qty, &a.Status, &a.Code, &id); err != nil {
		return a, fmt.Errorf("history: %q: %w", line, err)
	}
	a.Call, a.Return, a.Key, a.Code, id = time.UnixMilli(call), time.UnixMilli(ret), dash(a.Key), dash(a.Code), dash(id)
	if n, err := strconv.ParseInt(id, 10, 64); err == nil {
		a.OrderID = n
	} else {
		a.OrderRef = id
	}
	return a, nil
}

func dash(s string) string {
	if s == "-" {
		return ""
	}
	return s
}

// unknownOutcome reports an answer that says nothing of whether the
// purchase happened: 503 (including outcome_unknown), a gateway timeout or
// a dropped connection.
func unknownOutcome(status int) bool { return status == 503 || status == 504 || status == 0 }

// BuildHistory turns the recorded attempts and restocks of one SKU, which
// started the sale with initialStock units, into a History, resolving every
// unknown outcome from the database's orders in snap (loadtest/README.md,
// "Unknown outcomes"): an order that exists took place between the request
// and the end of the history; one that does not is left out; a keyless
// buyer with more unknown requests than unclaimed orders stays undecided
// (Maybe). Answers that touch no stock are not operations of the model.
// Intervals are widened to [call, return+1ms]: k6's clock is in
// milliseconds, and a wider interval only admits more.
func BuildHistory(initialStock int64, snap Snapshot, attempts []Attempt, restocks []Op) History {
	b := newHistoryBuilder(initialStock, snap, attempts, restocks)
	for _, as := range callsOf(attempts) {
		if first := b.answered(as); first != nil {
			b.unknown(*first)
		}
	}
	b.resolveKeyless()
	b.h.Ops = append(b.h.Ops, restocks...)
	sortOps(b.h.Ops)
	return b.h
}

// userKey is an Idempotency-Key, unique per buyer: two buyers may use one key.
type userKey struct{ user, key string }

// historyBuilder is BuildHistory's state.
type historyBuilder struct {
	h         History
	end       time.Time          // the end of the history, the answer time of resolved outcomes
	byKey     map[userKey]Order  // the database's keyed orders
	keyless   map[string][]int64 // user → keyless order ids
	claimed   map[int64]bool     // orders some answer named
	undecided map[string][]Op    // keyless unknowns by user
}

func newHistoryBuilder(initialStock int64, snap Snapshot, attempts []Attempt, restocks []Op) *historyBuilder {
	b := &historyBuilder{
		h:     History{InitialStock: initialStock, PerUserLimit: snap.SKU.PerUserLimit},
		byKey: map[userKey]Order{}, keyless: map[string][]int64{}, claimed: map[int64]bool{}, undecided: map[string][]Op{},
	}
	for _, a := range attempts {
		if r := a.Return.Add(time.Millisecond); r.After(b.end) {
			b.end = r
		}
		if a.OrderID != 0 {
			b.claimed[a.OrderID] = true
		}
	}
	for _, r := range restocks {
		if r.Return.After(b.end) {
			b.end = r.Return
		}
	}
	b.end = b.end.Add(time.Millisecond)
	for _, o := range snap.Orders {
		if o.IdempotencyKey != "" {
			b.byKey[userKey{o.UserID, o.IdempotencyKey}] = o
		} else {
			b.keyless[o.UserID] = append(b.keyless[o.UserID], o.ID)
		}
	}
	return b
}

// callsOf groups the attempts by call (same iteration, same kind), in the
// order the calls began: the attempts of one call share a key, so only
// one of them can have bought.
func callsOf(attempts []Attempt) [][]Attempt {
	type callID struct {
		it   int64
		kind string
	}
	index := map[callID]int{}
	var calls [][]Attempt
	for _, a := range attempts {
		id := callID{a.Iteration, a.Kind}
		i, ok := index[id]
		if !ok {
			i = len(calls)
			index[id] = i
			calls = append(calls, nil)
		}
		calls[i] = append(calls[i], a)
	}
	return calls
}

// answered adds the operations of one call's answers and returns its
// first attempt of unknown outcome that no later answer decided, if any.
func (b *historyBuilder) answered(as []Attempt) *Attempt {
	var firstUnknown *Attempt
	for i := range as {
		a := &as[i]
		if unknownOutcome(a.Status) {
			if firstUnknown == nil {
				firstUnknown = a
			}
			continue
		}
		op, ok := b.answerOp(a, firstUnknown)
		if !ok {
			continue
		}
		b.h.Ops = append(b.h.Ops, op)
		if op.Kind == Bought || op.Kind == Waited {
			firstUnknown = nil // the unknowns before a 201/202/200 did not buy
		}
	}
	return firstUnknown
}

// answerOp is the operation of a known answer; false for an answer that
// touches no stock: 200 replay, 400, 413, 429, idempotency_conflict.
func (b *historyBuilder) answerOp(a, firstUnknown *Attempt) (Op, bool) {
	op := Op{User: a.User, Qty: a.Qty, Key: a.Key, Instance: a.Instance, Client: a.VU,
		Call: a.Call, Return: a.Return.Add(time.Millisecond), Status: a.Status, OrderID: a.OrderID}
	switch {
	case a.Status == 201:
		op.Kind = Bought
	case a.Status == 202:
		op.Kind = Waited
	case a.Status == 200 && a.Kind == "order" && firstUnknown != nil:
		// A retry answered with the order an earlier attempt placed: the
		// purchase happened in one of them.
		op.Kind, op.Call = b.placed(a.User, a.Key), firstUnknown.Call
		b.h.Resolution.Unknown++
		b.h.Resolution.Happened++
	case a.Status == 409 && a.Code == SoldOutAnswer:
		op.Kind = SoldOutAnswer
	case a.Status == 409 && a.Code == LimitAnswer:
		op.Kind = LimitAnswer
	default:
		return op, false
	}
	return op, true
}

// placed is what the order of a buyer's key did when it was placed:
// Waited if the database has it placed waiting, else Bought.
func (b *historyBuilder) placed(user, key string) string {
	if b.byKey[userKey{user, key}].Waited {
		return Waited
	}
	return Bought
}

// unknown resolves a call left with an unknown outcome: by its key's
// order, or, keyless, later by its buyer's unclaimed orders.
func (b *historyBuilder) unknown(a Attempt) {
	b.h.Resolution.Unknown++
	op := Op{Kind: Bought, User: a.User, Qty: a.Qty, Key: a.Key, Instance: a.Instance, Client: a.VU,
		Call: a.Call, Return: b.end, Status: a.Status, Resolved: true}
	if a.Key == "" {
		b.undecided[a.User] = append(b.undecided[a.User], op)
		return
	}
	o, ok := b.byKey[userKey{a.User, a.Key}]
	if !ok || b.claimed[o.ID] {
		b.h.Resolution.Dropped++
		return
	}
	op.OrderID, op.Kind = o.ID, b.placed(a.User, a.Key)
	b.h.Resolution.Happened++
	b.h.Ops = append(b.h.Ops, op)
}

// resolveKeyless decides the keyless unknowns of each buyer by the orders
// of theirs no answer claimed: none, enough for all, or too few (Maybe).
func (b *historyBuilder) resolveKeyless() {
	for user, ops := range b.undecided {
		var free int
		for _, id := range b.keyless[user] {
			if !b.claimed[id] {
				free++
			}
		}
		switch {
		case free == 0:
			b.h.Resolution.Dropped += len(ops)
		case free >= len(ops):
			b.h.Resolution.Happened += len(ops)
			b.h.Ops = append(b.h.Ops, ops...)
		default:
			b.h.Resolution.Undecided += len(ops)
			for _, op := range ops {
				op.Kind = Maybe
				b.h.Ops = append(b.h.Ops, op)
			}
		}
	}
}
