package verify

import (
	"testing"
	"time"
)

// wop is user's waitlist operation of kind (Waited, Allotted, Left)
// within [call, ret] ms.
func wop(kind, user string, call, ret int) Op {
	o := op(kind, user, call, ret)
	if kind == Waited {
		o.Status = 202
	}
	return o
}

// TestCheckHistoryWaitlist holds the model of the waitlist: a 202 only
// where no unit could serve the order, units given only to a buyer
// waiting, never more than came back, and never left free to another
// buyer while a waiter they fit waits.
func TestCheckHistoryWaitlist(t *testing.T) {
	cases := []struct {
		name  string
		stock int64
		ops   []Op
		want  string
	}{
		{
			name: "a cancel's unit goes to the waiter; the rest lapse", stock: 1,
			ops: []Op{
				op(Bought, "a", 0, 10), wop(Waited, "w1", 20, 30), wop(Waited, "w2", 25, 35),
				returned("a", 40, 50), wop(Allotted, "w1", 45, 1045), op(SoldOutAnswer, "c", 60, 70),
				wop(Left, "w2", 2000, 3000),
			},
			want: Linearizable,
		},
		{
			name: "a restock goes to the waiters", stock: 1,
			ops: []Op{
				op(Bought, "a", 0, 10), wop(Waited, "w1", 20, 30), wop(Waited, "w2", 25, 35),
				restock(2, 40, 50), wop(Allotted, "w1", 42, 1042), wop(Allotted, "w2", 42, 1042),
			},
			want: Linearizable,
		},
		{
			name: "told to wait while a unit was free", stock: 2,
			ops:  []Op{op(Bought, "a", 0, 10), wop(Waited, "w1", 20, 30)},
			want: NotLinear,
		},
		{
			name: "a returned unit sold to another while a waiter waited", stock: 1,
			ops: []Op{
				op(Bought, "a", 0, 10), wop(Waited, "w1", 20, 30),
				returned("a", 40, 50), op(Bought, "b", 60, 70),
			},
			want: NotLinear,
		},
		{
			name: "units given to a buyer who never waited", stock: 1,
			ops: []Op{
				op(Bought, "a", 0, 10), returned("a", 40, 50), wop(Allotted, "x", 45, 1045),
			},
			want: NotLinear,
		},
		{
			name: "more given than came back", stock: 1,
			ops: []Op{
				op(Bought, "a", 0, 10), wop(Waited, "w1", 20, 30), wop(Waited, "w2", 25, 35),
				returned("a", 40, 50), wop(Allotted, "w1", 45, 1045), wop(Allotted, "w2", 45, 1045),
			},
			want: NotLinear,
		},
		{
			name: "a waiter over the limit", stock: 2,
			ops: []Op{
				op(Bought, "w1", 0, 10), op(Bought, "w1", 20, 30), wop(Waited, "w1", 40, 50),
			},
			want: NotLinear,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := History{InitialStock: tc.stock, PerUserLimit: 2, Ops: tc.ops}
			sortOps(h.Ops)
			v := CheckHistory(h, HistoryOptions{SoldOutBound: 500 * time.Millisecond, FinalStock: -1})
			if v.Result != tc.want {
				t.Fatalf("CheckHistory = %s (%v); want %s", v.Result, v.Violations, tc.want)
			}
		})
	}
}

// TestBuildHistoryWaited: a 202 is Waited, and so is an unknown outcome
// whose order the database has placed waiting, resolved by a retry's 200
// or by the key alone.
func TestBuildHistoryWaited(t *testing.T) {
	attempt := func(call, ret int, user string, try, status int, id int64) Attempt {
		return Attempt{Call: at(call), Return: at(ret), VU: len(user), Iteration: int64(len(user)), Kind: "order", Attempt: try,
			Instance: "i0", User: user, Key: "k" + user, Qty: 1, Status: status, OrderID: id}
	}
	attempts := []Attempt{
		attempt(0, 10, "w", 0, 202, 1),
		attempt(0, 10, "xx", 0, 503, 0), attempt(20, 30, "xx", 1, 200, 2),
		attempt(0, 10, "yyy", 0, 0, 0),
	}
	snap := Snapshot{SKU: SKU{PerUserLimit: 1}, Orders: []Order{
		{ID: 1, UserID: "w", Quantity: 1, IdempotencyKey: "kw", Waited: true},
		{ID: 2, UserID: "xx", Quantity: 1, IdempotencyKey: "kxx", Waited: true},
		{ID: 3, UserID: "yyy", Quantity: 1, IdempotencyKey: "kyyy", Waited: true},
	}}
	h := BuildHistory(0, snap, attempts, nil)
	for _, o := range h.Ops {
		if o.Kind != Waited {
			t.Errorf("%s: kind %s; want %s", o, o.Kind, Waited)
		}
	}
	if len(h.Ops) != 3 {
		t.Errorf("BuildHistory ops %v; want the 3 waits", h.Ops)
	}
	if v := CheckHistory(h, HistoryOptions{FinalStock: 0}); !v.Pass() {
		t.Errorf("CheckHistory = %s %v; want %s", v.Result, v.Violations, Linearizable)
	}
}
