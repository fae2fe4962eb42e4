package verify

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Attempt is one HTTP order request as the load generator recorded it.
// sale.js writes one console line per request:
//
//	hist <call ms> <return ms> <vu> <iteration> <call> <attempt> <instance> <user> <key|-> <qty> <status> <code|-> <order id|->
//
// where call is "order" (a purchase and its retries, one Idempotency-Key),
// "replay" (the same key sent again after a 201) or "conflict" (the key
// reused with another body). Times are k6's Date.now(), milliseconds.
type Attempt struct {
	Call, Return time.Time
	VU           int
	Iteration    int64
	Kind         string // order, replay, conflict
	Attempt      int
	Instance     string
	User         string
	Key          string
	Qty          int64
	Status       int
	Code         string
	OrderID      int64
	// OrderRef is the order id as the buyer was told it, when it is not a
	// number (the service's opaque ids): the caller decodes it into OrderID.
	OrderRef string
}

// HistoryLinePrefix starts every history line of sale.js.
const HistoryLinePrefix = "hist "

// ParseAttempt parses one history line (see Attempt).
func ParseAttempt(line string) (Attempt, error) {
	f := strings.Fields(line)
	var a Attempt
	if len(f) != 14 || f[0] != "hist" {
		return a, fmt.Errorf("history: not a record: %q", line)
	}
	var nums [6]int64
	for i, idx := range []int{1, 2, 3, 4, 6, 10} {
		v, err := strconv.ParseInt(f[idx], 10, 64)
		if err != nil {
			return a, fmt.Errorf("history: field %d of %q: %w", idx, line, err)
		}
		nums[i] = v
	}
	status, err := strconv.Atoi(f[11])
	if err != nil {
		return a, fmt.Errorf("history: status of %q: %w", line, err)
	}
	a.Call, a.Return = time.UnixMilli(nums[0]), time.UnixMilli(nums[1])
	a.VU, a.Iteration, a.Kind, a.Attempt = int(nums[2]), nums[3], f[5], int(nums[4])
	a.Instance, a.User, a.Key, a.Qty, a.Status = f[7], f[8], dash(f[9]), nums[5], status
	a.Code = dash(f[12])
	if id := dash(f[13]); id != "" {
		if n, err := strconv.ParseInt(id, 10, 64); err == nil {
			a.OrderID = n
		} else {
			a.OrderRef = id
		}
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
// started the sale with initialStock units, into a History, resolving every unknown outcome from the database's orders in
// snap: an Idempotency-Key or a buyer with a single unknown request names
// the order or proves there is none. An order that exists took place at
// some time after the request was sent, so it is given the end of the
// history as its answer time; one that does not exist is left out. Only a
// keyless buyer with more unknown requests than unclaimed orders stays
// undecided (Maybe). Answers that touch no stock (400, 413, 429,
// idempotency_conflict, replays) are not operations of the model.
//
// Milliseconds are widened to the whole millisecond: a request sent at
// Date.now() = t was sent within [t, t+1ms), so its interval is taken as
// [call, return+1ms], which can only admit more orders, never fewer.
func BuildHistory(initialStock int64, snap Snapshot, attempts []Attempt, restocks []Op) History {
	h := History{InitialStock: initialStock, PerUserLimit: snap.SKU.PerUserLimit}
	end := time.Time{}
	for _, a := range attempts {
		if r := a.Return.Add(time.Millisecond); r.After(end) {
			end = r
		}
	}
	for _, r := range restocks {
		if r.Return.After(end) {
			end = r.Return
		}
	}
	end = end.Add(time.Millisecond)

	// Idempotency keys are unique per buyer: two buyers may use one key.
	type userKey struct{ user, key string }
	byKey := map[userKey]Order{}
	claimed := map[int64]bool{}
	keyless := map[string][]int64{} // user → keyless order ids
	for _, o := range snap.Orders {
		if o.IdempotencyKey != "" {
			byKey[userKey{o.UserID, o.IdempotencyKey}] = o
		} else {
			keyless[o.UserID] = append(keyless[o.UserID], o.ID)
		}
	}
	for _, a := range attempts {
		if a.OrderID != 0 {
			claimed[a.OrderID] = true
		}
	}

	// The attempts of one call (same iteration, same kind) share a key:
	// only one of them can have bought.
	type callID struct {
		it   int64
		kind string
	}
	calls := map[callID][]Attempt{}
	var order []callID
	for _, a := range attempts {
		id := callID{a.Iteration, a.Kind}
		if _, ok := calls[id]; !ok {
			order = append(order, id)
		}
		calls[id] = append(calls[id], a)
	}
	undecided := map[string][]Op{} // keyless unknowns by user
	for _, id := range order {
		as := calls[id]
		var firstUnknown *Attempt
		for i := range as {
			a := &as[i]
			op := Op{User: a.User, Qty: a.Qty, Key: a.Key, Instance: a.Instance, Client: a.VU,
				Call: a.Call, Return: a.Return.Add(time.Millisecond), Status: a.Status, OrderID: a.OrderID}
			switch {
			case unknownOutcome(a.Status):
				if firstUnknown == nil {
					firstUnknown = a
				}
				continue
			case a.Status == 201:
				op.Kind = Bought
			case a.Status == 200 && a.Kind == "order" && firstUnknown != nil:
				// A retry answered with the order an earlier attempt
				// placed: the purchase happened in one of them.
				op.Kind, op.Call = Bought, firstUnknown.Call
				h.Resolution.Unknown++
				h.Resolution.Happened++
			case a.Status == 409 && a.Code == SoldOutAnswer:
				op.Kind = SoldOutAnswer
			case a.Status == 409 && a.Code == LimitAnswer:
				op.Kind = LimitAnswer
			default:
				continue // touches no stock: 200 replay, 400, 413, 429, idempotency_conflict
			}
			h.Ops = append(h.Ops, op)
			if op.Kind == Bought {
				firstUnknown = nil // the unknowns before a 201/200 did not buy
			}
		}
		if firstUnknown == nil {
			continue
		}
		h.Resolution.Unknown++
		a := *firstUnknown
		op := Op{Kind: Bought, User: a.User, Qty: a.Qty, Key: a.Key, Instance: a.Instance, Client: a.VU,
			Call: a.Call, Return: end, Status: a.Status, Resolved: true}
		if a.Key != "" {
			o, ok := byKey[userKey{a.User, a.Key}]
			if !ok || claimed[o.ID] {
				h.Resolution.Dropped++
				continue
			}
			op.OrderID = o.ID
			h.Resolution.Happened++
			h.Ops = append(h.Ops, op)
			continue
		}
		undecided[a.User] = append(undecided[a.User], op)
	}
	for user, ops := range undecided {
		var free int
		for _, id := range keyless[user] {
			if !claimed[id] {
				free++
			}
		}
		switch {
		case free == 0:
			h.Resolution.Dropped += len(ops)
		case free >= len(ops):
			h.Resolution.Happened += len(ops)
			h.Ops = append(h.Ops, ops...)
		default:
			h.Resolution.Undecided += len(ops)
			for _, op := range ops {
				op.Kind = Maybe
				h.Ops = append(h.Ops, op)
			}
		}
	}
	h.Ops = append(h.Ops, restocks...)
	sortOps(h.Ops)
	return h
}
