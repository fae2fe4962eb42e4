package verify

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

// op is a recorded operation invoked at call ms and answered at ret ms.
func op(kind, user string, call, ret int) Op {
	return Op{Kind: kind, User: user, Qty: 1, Call: at(call), Return: at(ret), Instance: "i0", Status: map[string]int{Bought: 201, SoldOutAnswer: 409, LimitAnswer: 409}[kind]}
}

// returned is user's order giving its unit back (a cancel or an expiry)
// at some moment within [call, ret] ms.
func returned(user string, call, ret int) Op {
	return Op{Kind: Returned, User: user, Qty: 1, Call: at(call), Return: at(ret), Instance: "i0"}
}

func restock(stock int64, call, ret int) Op {
	return Op{Kind: Restock, Stock: stock, Call: at(call), Return: at(ret), Instance: "admin"}
}

func TestCheckHistory(t *testing.T) {
	const bound = 500 * time.Millisecond
	cases := []struct {
		name    string
		stock   int64
		final   int64 // -1: unknown
		ops     []Op
		want    string
		witness string // a violation that must be named
	}{
		{
			name: "concurrent overlapping sales and a sold_out", stock: 2, final: 0,
			ops: []Op{
				op(Bought, "a", 0, 100), op(Bought, "b", 10, 90),
				op(SoldOutAnswer, "c", 50, 60), // overlaps both sales: linearized after them
				op(SoldOutAnswer, "d", 200, 210),
			},
			want: Linearizable,
		},
		{
			name: "sold_out then a restock then a sale", stock: 1, final: 0,
			ops: []Op{
				op(Bought, "a", 0, 10), op(SoldOutAnswer, "b", 20, 30),
				restock(1, 40, 50), op(Bought, "c", 60, 70),
			},
			want: Linearizable,
		},
		{
			name: "sold_out within the bound after a restock", stock: 1, final: 0,
			ops: []Op{
				op(Bought, "a", 0, 10), restock(1, 20, 30),
				op(SoldOutAnswer, "b", 200, 210), // a mark not yet refreshed: 170ms < bound
				op(Bought, "c", 300, 310),
			},
			want: Linearizable,
		},
		{
			name: "repeat buyer refused at the limit", stock: 5, final: 3,
			ops: []Op{
				op(Bought, "r", 0, 10), op(Bought, "r", 20, 30), op(LimitAnswer, "r", 40, 50),
			},
			want: Linearizable,
		},
		{
			name: "unknown outcome resolved as happened", stock: 2, final: 0,
			ops: []Op{
				op(Bought, "a", 0, 10),
				{Kind: Bought, User: "u", Qty: 1, Call: at(5), Return: at(1000), Resolved: true, Status: 503},
				op(SoldOutAnswer, "b", 50, 60), // needs u's unit taken before it
			},
			want: Linearizable,
		},
		{
			name: "undecided outcome taken either way", stock: 2, final: 1,
			ops: []Op{
				op(Bought, "a", 0, 10),
				{Kind: Maybe, User: "u", Qty: 1, Call: at(5), Return: at(1000), Status: 0},
				op(Bought, "b", 100, 110),
			},
			want: Linearizable,
		},
		{
			name: "a cancel returns the unit a later buyer takes", stock: 1, final: 0,
			ops: []Op{
				op(Bought, "a", 0, 10), op(SoldOutAnswer, "x", 15, 18),
				returned("a", 20, 30), op(Bought, "b", 40, 50),
				op(SoldOutAnswer, "c", 900, 910),
			},
			want: Linearizable,
		},
		{
			name: "a sold_out overlapping an expiry's interval", stock: 1, final: 0,
			ops: []Op{
				op(Bought, "a", 0, 10), returned("a", 20, 1000),
				op(SoldOutAnswer, "c", 900, 910), // the unit may come back after it
				op(Bought, "b", 1100, 1110),
			},
			want: Linearizable,
		},
		{
			name: "a sold_out within the bound after a return", stock: 1, final: 1,
			ops: []Op{
				op(Bought, "a", 0, 10), returned("a", 20, 30),
				op(SoldOutAnswer, "c", 300, 310), // a mark not yet refreshed: 270ms < bound
			},
			want: Linearizable,
		},
		{
			name: "the buyer buys again after a return, at the limit", stock: 5, final: 2,
			ops: []Op{
				op(Bought, "r", 0, 10), op(Bought, "r", 20, 30), op(LimitAnswer, "r", 40, 50),
				returned("r", 60, 70), op(Bought, "r", 80, 90), op(LimitAnswer, "r", 100, 110),
			},
			want: Linearizable,
		},
		{
			name: "a sold_out well after a cancel returned a unit nobody took", stock: 1, final: -1,
			ops: []Op{
				op(Bought, "a", 0, 10), returned("a", 20, 30),
				op(SoldOutAnswer, "b", 1000, 1010),
			},
			want: NotLinear, witness: HistoryNotLinearizable,
		},
		{
			name: "a sold_out well after a return, the unit left at the end", stock: 1, final: 1,
			ops: []Op{
				op(Bought, "a", 0, 10), returned("a", 20, 30),
				op(SoldOutAnswer, "b", 1000, 1010),
			},
			want: NotLinear, witness: SoldOutWhileStockRemained,
		},
		{
			name: "a sale after a sold_out, the only return before both", stock: 1, final: 0,
			ops: []Op{
				op(Bought, "a", 0, 10), returned("a", 20, 30),
				op(SoldOutAnswer, "b", 1000, 1010), op(Bought, "c", 1100, 1110),
			},
			want: NotLinear, witness: SaleAfterSoldOut,
		},
		{
			name: "more sold than the stock and the returns", stock: 1, final: 0,
			ops: []Op{
				op(Bought, "a", 0, 10), returned("a", 20, 30),
				op(Bought, "b", 40, 50), op(Bought, "c", 60, 70),
			},
			want: NotLinear, witness: SoldPastZero,
		},
		{
			name: "a limit refusal after a return left the buyer below it", stock: 5, final: -1,
			ops: []Op{
				op(Bought, "r", 0, 10), op(Bought, "r", 20, 30),
				returned("r", 40, 50), op(LimitAnswer, "r", 60, 70),
			},
			want: NotLinear, witness: HistoryNotLinearizable,
		},
		{
			name: "a sale after sold_out with no restock", stock: 1, final: 0,
			ops: []Op{
				op(SoldOutAnswer, "b", 0, 10), op(Bought, "a", 20, 30),
			},
			want: NotLinear, witness: SaleAfterSoldOut,
		},
		{
			name: "a 201 past zero", stock: 2, final: 0,
			ops: []Op{
				op(Bought, "a", 0, 10), op(Bought, "b", 20, 30), op(Bought, "c", 40, 50),
			},
			want: NotLinear, witness: SoldPastZero,
		},
		{
			name: "a 201 past zero after a restock, sales overlapping it aside", stock: 5, final: 0,
			ops: []Op{
				op(Bought, "a", 0, 10), restock(1, 20, 30),
				op(Bought, "x", 25, 40), // may fall before the restock: not counted
				op(Bought, "b", 50, 60), op(Bought, "c", 70, 80),
			},
			want: NotLinear, witness: SoldPastZero,
		},
		{
			name: "a sold_out while units remain, beyond the bound", stock: 3, final: 2,
			ops: []Op{
				op(Bought, "a", 0, 10), op(SoldOutAnswer, "b", 600, 610),
			},
			want: NotLinear, witness: SoldOutWhileStockRemained,
		},
		{
			name: "a sold_out while units remain, beyond the bound after a restock", stock: 1, final: 0,
			ops: []Op{
				op(Bought, "a", 0, 10), restock(2, 20, 30),
				op(SoldOutAnswer, "b", 700, 710), // 670ms after the restock: stale past the bound
				op(Bought, "c", 800, 810), op(Bought, "d", 820, 830),
			},
			want: NotLinear, witness: SaleAfterSoldOut,
		},
		{
			name: "a refusal at the limit the buyer had not reached", stock: 5, final: 4,
			ops: []Op{
				op(Bought, "r", 0, 10), op(LimitAnswer, "r", 20, 30),
			},
			want: NotLinear, witness: HistoryNotLinearizable,
		},
		{
			name: "unknown outcome resolved as happened oversells", stock: 1, final: 0,
			ops: []Op{
				{Kind: Bought, User: "u", Qty: 1, Call: at(0), Return: at(1000), Resolved: true, Status: 503},
				op(Bought, "a", 100, 110), op(Bought, "b", 200, 210),
			},
			want: NotLinear, witness: HistoryNotLinearizable,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			viz := filepath.Join(t.TempDir(), "history.html")
			h := History{InitialStock: tc.stock, PerUserLimit: 2, Ops: tc.ops}
			sortOps(h.Ops)
			v := CheckHistory(h, HistoryOptions{SoldOutBound: bound, FinalStock: tc.final, Visualization: viz})
			if v.Result != tc.want {
				t.Fatalf("CheckHistory = %s (%v); want %s", v.Result, v.Violations, tc.want)
			}
			if tc.witness == "" {
				if len(v.Violations) > 0 {
					t.Fatalf("CheckHistory violations %v; want none", v.Violations)
				}
				if _, err := os.Stat(viz); err == nil {
					t.Errorf("a visualization was written for a linearizable history")
				}
				return
			}
			var names []string
			for _, x := range v.Violations {
				names = append(names, x.Name)
			}
			if !strings.Contains(strings.Join(names, " "), tc.witness) {
				t.Fatalf("CheckHistory violations %v; want %s among them", names, tc.witness)
			}
			if tc.witness == HistoryNotLinearizable {
				if _, err := os.Stat(viz); err != nil {
					t.Errorf("no Porcupine visualization for a violation: %v", err)
				}
			}
		})
	}
}

// TestCheckHistoryNotConcluded bounds only Porcupine's search: a history
// longer than MaxOps that the certificate proves passes, one it cannot
// prove is reported not concluded, never a pass.
func TestCheckHistoryNotConcluded(t *testing.T) {
	var ops []Op
	for i := range 10 {
		ops = append(ops, op(Bought, "u"+string(rune('a'+i)), i, i+1))
	}
	v := CheckHistory(History{InitialStock: 10, PerUserLimit: 2, Ops: ops}, HistoryOptions{MaxOps: 5, FinalStock: 0})
	if !v.Pass() || !v.Certified || v.Searched != 10 {
		t.Fatalf("CheckHistory of 10 sales, a bound of 5 = %s (certified %v, %d searched); want %s by the certificate over 10", v.Result, v.Certified, v.Searched, Linearizable)
	}

	// Ten sales overlapping a restock to 9 from nothing (a 201 past zero
	// no witness names, since each may fall on either side): only the
	// search could say so, and it is not allowed this many operations.
	var overlapping []Op
	for i := range 10 {
		overlapping = append(overlapping, op(Bought, "u"+string(rune('a'+i)), i, 100+i))
	}
	overlapping = append(overlapping, restock(9, 0, 200))
	v = CheckHistory(History{InitialStock: 0, PerUserLimit: 2, Ops: overlapping}, HistoryOptions{MaxOps: 5, FinalStock: -1})
	if v.Result != NotConcluded || v.Pass() || v.Certified {
		t.Fatalf("CheckHistory of 10 sales of 9 units, a bound of 5 = %s %v; want %s, not a pass", v.Result, v.Violations, NotConcluded)
	}
	if len(v.Violations) != 1 || v.Violations[0].Name != HistoryNotConcluded || !strings.Contains(v.String(), "exceed the search's bound of 5") ||
		!strings.Contains(v.Reason, "the certificate stopped at no unit for") {
		t.Fatalf("CheckHistory violations %v, %q; want %s naming the bound", v.Violations, v, HistoryNotConcluded)
	}
	// Allowed the operations, the search refutes it.
	if v := CheckHistory(History{InitialStock: 0, PerUserLimit: 2, Ops: overlapping}, HistoryOptions{FinalStock: -1}); v.Result != NotLinear {
		t.Fatalf("CheckHistory of 10 sales of 9 units, no bound = %s; want %s", v.Result, NotLinear)
	}
}

// TestBuildHistoryKeysPerBuyer resolves an unknown outcome by the
// buyer's own key: another buyer's order under the same key says nothing
// of it.
func TestBuildHistoryKeysPerBuyer(t *testing.T) {
	unknown := Attempt{Call: at(0), Return: at(10), VU: 1, Iteration: 1, Kind: "order", Instance: "i0", User: "alice", Key: "order-1", Qty: 1, Status: 503}
	other := Attempt{Call: at(0), Return: at(10), VU: 2, Iteration: 2, Kind: "order", Instance: "i0", User: "bob", Key: "order-1", Qty: 1, Status: 201, OrderID: 2}
	snap := Snapshot{SKU: SKU{TotalStock: 2, Sold: 2, PerUserLimit: 1}, Orders: []Order{
		{ID: 1, UserID: "alice", Quantity: 1, IdempotencyKey: "order-1"},
		{ID: 2, UserID: "bob", Quantity: 1, IdempotencyKey: "order-1"},
	}}
	h := BuildHistory(2, snap, []Attempt{unknown, other}, nil)
	if want := (Resolution{Unknown: 1, Happened: 1}); h.Resolution != want {
		t.Fatalf("BuildHistory resolution = %+v; want %+v (alice's own order-1 exists)", h.Resolution, want)
	}
}

// TestBuildHistory resolves unknown outcomes from the database both ways:
// a key that names an order happened, a key that names none did not, a
// keyless buyer with one unknown request and one unclaimed order happened.
func TestBuildHistory(t *testing.T) {
	ms := t0.UnixMilli()
	line := func(call, ret int64, vu, it int, kind string, attempt int, user, key string, status int, code, id string) string {
		return strings.Join([]string{"hist", itoa(ms + call), itoa(ms + ret), itoa(int64(vu)), itoa(int64(it)), kind, itoa(int64(attempt)),
			"i0", user, key, "1", itoa(int64(status)), code, id}, " ")
	}
	lines := []string{
		line(0, 10, 1, 1, "order", 0, "a", "ka", 201, "-", "11"),
		line(0, 10, 2, 2, "order", 0, "b", "kb", 503, "unavailable", "-"), // order 12 exists: happened
		line(20, 30, 2, 2, "order", 1, "b", "kb", 409, "sold_out", "-"),
		line(0, 10, 3, 3, "order", 0, "c", "kc", 0, "-", "-"), // no order: did not happen
		line(20, 30, 3, 3, "order", 1, "c", "kc", 409, "sold_out", "-"),
		line(0, 10, 4, 4, "order", 0, "d", "-", 503, "unavailable", "-"),  // keyless, one free order: happened
		line(0, 10, 5, 5, "order", 0, "e", "ke", 503, "unavailable", "-"), // retried, answered with the order
		line(20, 30, 5, 5, "order", 1, "e", "ke", 200, "-", "14"),
		line(40, 50, 5, 5, "replay", 0, "e", "ke", 200, "-", "14"),
		line(40, 50, 6, 6, "order", 0, "f", "kf", 429, "busy", "-"),
	}
	var attempts []Attempt
	for _, l := range lines {
		a, err := ParseAttempt(l)
		if err != nil {
			t.Fatal(err)
		}
		attempts = append(attempts, a)
	}
	snap := Snapshot{SKU: SKU{TotalStock: 4, Stock: 0, Sold: 4, PerUserLimit: 2}, Orders: []Order{
		{ID: 11, UserID: "a", Quantity: 1, IdempotencyKey: "ka"},
		{ID: 12, UserID: "b", Quantity: 1, IdempotencyKey: "kb"},
		{ID: 13, UserID: "d", Quantity: 1},
		{ID: 14, UserID: "e", Quantity: 1, IdempotencyKey: "ke"},
	}}
	h := BuildHistory(4, snap, attempts, nil)
	want := Resolution{Unknown: 4, Happened: 3, Dropped: 1}
	if h.Resolution != want {
		t.Errorf("BuildHistory resolution = %+v; want %+v", h.Resolution, want)
	}
	kinds := map[string]int{}
	for _, o := range h.Ops {
		kinds[o.Kind]++
	}
	if kinds[Bought] != 4 || kinds[SoldOutAnswer] != 2 || len(h.Ops) != 6 {
		t.Errorf("BuildHistory ops %v; want 4 bought (a, b resolved, d resolved, e's retry) and 2 sold_out", kinds)
	}
	v := CheckHistory(h, HistoryOptions{SoldOutBound: 500 * time.Millisecond, FinalStock: 0})
	if !v.Pass() {
		t.Errorf("CheckHistory = %s %v; want %s", v.Result, v.Violations, Linearizable)
	}
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }

// TestCheckHistorySettledTail lets one sold_out answer asked after every
// change to the stock stand for all of them in the search, and still
// reports one that is wrong.
func TestCheckHistorySettledTail(t *testing.T) {
	ops := []Op{op(Bought, "a", 0, 10), restock(2, 20, 30), op(Bought, "b", 40, 50), op(Bought, "c", 45, 60)}
	for i := range 100 {
		ops = append(ops, op(SoldOutAnswer, "s"+strconv.Itoa(i), 600+i, 601+i))
	}
	h := History{InitialStock: 1, PerUserLimit: 2, Ops: ops}
	sortOps(h.Ops)
	v := CheckHistory(h, HistoryOptions{SoldOutBound: 500 * time.Millisecond, FinalStock: 0})
	if !v.Pass() || v.Settled != 99 {
		t.Fatalf("CheckHistory = %s, %d settled %v; want %s with 99 sold_out stood for by one", v.Result, v.Settled, v.Violations, Linearizable)
	}

	// Without c's sale one unit remains: every tail answer is wrong.
	h.Ops = append([]Op(nil), ops[:3]...)
	h.Ops = append(h.Ops, ops[4:]...)
	v = CheckHistory(h, HistoryOptions{SoldOutBound: 500 * time.Millisecond, FinalStock: 1})
	if v.Result != NotLinear {
		t.Fatalf("CheckHistory with a unit left = %s; want %s", v.Result, NotLinear)
	}
	// Without the exact witness, the search alone must still refuse it.
	h.Ops = h.Ops[:4]
	if v := CheckHistory(h, HistoryOptions{SoldOutBound: 500 * time.Millisecond, FinalStock: -1}); v.Result != NotLinear {
		t.Fatalf("CheckHistory with a unit left, final stock unknown = %s; want %s", v.Result, NotLinear)
	}
}

// TestCheckHistorySettledTailUnknown settles the tail even when an unknown
// outcome, resolved as happened, is answered at the end of the history.
func TestCheckHistorySettledTailUnknown(t *testing.T) {
	ops := []Op{op(Bought, "a", 0, 10),
		{Kind: Bought, User: "u", Qty: 1, Call: at(5), Return: at(5000), Resolved: true, Status: 503}}
	for i := range 50 {
		ops = append(ops, op(SoldOutAnswer, "s"+strconv.Itoa(i), 600+i, 601+i))
	}
	h := History{InitialStock: 2, PerUserLimit: 2, Ops: ops}
	sortOps(h.Ops)
	v := CheckHistory(h, HistoryOptions{SoldOutBound: 500 * time.Millisecond, FinalStock: 0})
	if !v.Pass() || v.Settled != 49 {
		t.Fatalf("CheckHistory = %s, %d settled %v; want %s with 49 stood for by one", v.Result, v.Settled, v.Violations, Linearizable)
	}
	h.InitialStock = 3 // a unit left: every tail answer is wrong
	if v := CheckHistory(h, HistoryOptions{SoldOutBound: 500 * time.Millisecond, FinalStock: -1}); v.Result != NotLinear {
		t.Fatalf("CheckHistory with a unit left = %s; want %s", v.Result, NotLinear)
	}
}

// TestCheckHistoryCertified proves without the search a history shaped
// like a paused instance's: a sale answered seconds late (its commit came
// first: a limit_exceeded of the same buyer needs it early), restocks
// between, sold_out answers in each sold-out window.
func TestCheckHistoryCertified(t *testing.T) {
	ops := []Op{
		op(Bought, "r", 0, 10),
		op(Bought, "r", 20, 5000), // answered late: the instance was paused
		op(Bought, "a", 30, 40),
		op(LimitAnswer, "r", 100, 110), // r already holds 2
		op(SoldOutAnswer, "s1", 200, 210),
		restock(1, 300, 310),
		op(Bought, "b", 320, 330),
		op(SoldOutAnswer, "s2", 400, 410),
		restock(1, 500, 510),
		op(Bought, "c", 520, 530),
	}
	for i := range 40 { // refusals overlapping everything
		ops = append(ops, op(SoldOutAnswer, "x"+strconv.Itoa(i), 560+i, 600+i))
	}
	h := History{InitialStock: 3, PerUserLimit: 2, Ops: ops}
	sortOps(h.Ops)
	v := CheckHistory(h, HistoryOptions{SoldOutBound: 500 * time.Millisecond, FinalStock: 0})
	if !v.Pass() || !v.Certified {
		t.Fatalf("CheckHistory = %s, certified %v %v; want %s, certified", v.Result, v.Certified, v.Violations, Linearizable)
	}
	// One unit more at the start: s1 was false, and the search says so.
	h.InitialStock = 4
	if v := CheckHistory(h, HistoryOptions{SoldOutBound: 500 * time.Millisecond, FinalStock: -1}); v.Result != NotLinear || v.Certified {
		t.Fatalf("CheckHistory with a unit left before the restock = %s (certified %v); want %s", v.Result, v.Certified, NotLinear)
	}
}

// TestCheckHistoryCertifiedRestockBeforeItsAnswer proves a history in
// which a sale answered before the restock that gave it its unit had
// answered (the restock committed first; its answer came later): the
// restock takes effect within its interval, before that sale: a paused
// instance's history of this shape is too long for Porcupine alone.
func TestCheckHistoryCertifiedRestockBeforeItsAnswer(t *testing.T) {
	ops := []Op{
		op(Bought, "a", 0, 10),
		op(Bought, "late", 5, 3000), // a paused instance's sale of the last unit
		op(SoldOutAnswer, "s1", 100, 110),
		op(Bought, "b", 2900, 3100), // waits for the restock: its deadline is later
		restock(2, 3000, 3200),
		op(Bought, "c", 3050, 3150), // answered before the restock: took a restocked unit
		op(SoldOutAnswer, "s2", 3300, 3310),
	}
	for i := range 40 { // refusals overlapping the restock
		ops = append(ops, op(SoldOutAnswer, "x"+strconv.Itoa(i), 2950+i, 3000+i))
	}
	h := History{InitialStock: 2, PerUserLimit: 2, Ops: ops}
	sortOps(h.Ops)
	v := CheckHistory(h, HistoryOptions{SoldOutBound: 500 * time.Millisecond, FinalStock: 0})
	if !v.Pass() || !v.Certified {
		t.Fatalf("CheckHistory = %s, certified %v %v; want %s, certified", v.Result, v.Certified, v.Violations, Linearizable)
	}
	// Answered before the restock was invoked, c took a unit that was not there.
	h.Ops = append([]Op(nil), ops[:7]...)
	h.Ops[5].Call, h.Ops[5].Return = at(2950), at(2990)
	sortOps(h.Ops)
	if v := CheckHistory(h, HistoryOptions{SoldOutBound: 500 * time.Millisecond, FinalStock: 0}); v.Result != NotLinear || v.Certified {
		t.Fatalf("CheckHistory with a sale done before the restock was asked = %s (certified %v); want %s", v.Result, v.Certified, NotLinear)
	}
}

// TestCheckHistoryCertifiedUndecided proves histories with an undecided
// outcome (a keyless buyer's lost answers) taken either way, as the model
// steps it: one needs it taken, one needs it not taken.
func TestCheckHistoryCertifiedUndecided(t *testing.T) {
	maybe := Op{Kind: Maybe, User: "m", Qty: 1, Call: at(5), Return: at(1000), Status: 0}
	cases := map[string]History{
		"taken": {InitialStock: 2, PerUserLimit: 2, Ops: []Op{
			op(Bought, "a", 0, 10), maybe, op(SoldOutAnswer, "s", 50, 60)}},
		"not taken": {InitialStock: 2, PerUserLimit: 2, Ops: []Op{
			maybe, op(Bought, "a", 6, 10), op(Bought, "b", 20, 30)}},
	}
	for name, h := range cases {
		sortOps(h.Ops)
		v := CheckHistory(h, HistoryOptions{SoldOutBound: 500 * time.Millisecond, FinalStock: -1})
		if !v.Pass() || !v.Certified {
			t.Errorf("%s: CheckHistory = %s, certified %v %v; want %s, certified", name, v.Result, v.Certified, v.Violations, Linearizable)
		}
	}
	// Taken or not, a third sale of two units oversells.
	h := History{InitialStock: 2, PerUserLimit: 2, Ops: []Op{maybe, op(Bought, "a", 6, 10), op(Bought, "b", 20, 30), op(Bought, "c", 40, 50)}}
	sortOps(h.Ops)
	if v := CheckHistory(h, HistoryOptions{SoldOutBound: 500 * time.Millisecond, FinalStock: -1}); v.Result != NotLinear || v.Certified {
		t.Fatalf("CheckHistory of three sales of two units = %s (certified %v); want %s", v.Result, v.Certified, NotLinear)
	}
}
