package engine

import (
	"fmt"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/seckill/seckill/service"
)

// TestPlacesHoldTheLineOnlyForBusy: a buyer told 429 busy holds up the
// younger until it comes back; one told 503 keeps its arrival for its
// return but holds nobody up; either comes back with its first arrival.
func TestPlacesHoldTheLineOnlyForBusy(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		err  error
		hold bool
	}{
		{"busy", service.ErrBusy, true},
		{"too many skus", service.ErrTooManySKUs, true},
		{"unavailable", fmt.Errorf("%w: waited past order.request_timeout", service.ErrUnavailable), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := newPlaces(100, comeBackAfter+5*time.Second, nil, nil)
			r := service.OrderRequest{SKUID: 7, UserID: "u", IdempotencyKey: "k", Quantity: 1}
			first := time.Now().UnixMicro() - 1000 // 1ms ago
			p.comeBack(r, first, tc.err)
			ahead := p.ahead(7)
			if got := ahead == first; got != tc.hold {
				t.Errorf("ahead(sku 7) = %d after %v (arrived %d); holds the line: %v, want %v", ahead, tc.err, first, got, tc.hold)
			}
			if got := p.arrival(r); got != first {
				t.Errorf("arrival(the same request, back) = %d; want its first, %d", got, first)
			}
			if got := p.ahead(7); got != noLimit {
				t.Errorf("ahead(sku 7) = %d once the buyer came back; want noLimit", got)
			}
		})
	}
}

// TestPlacesKeptForTheSameRequestOnly: a place is the request's, not its
// key's (docs/api.md, "Idempotency keys"): a buyer told 429 for one unit
// who comes back with the same key for five is a new arrival, and no
// longer holds up the younger; the request it was told about still finds
// its place. A place posted by an instance of an earlier version carries
// no quantity and is kept for any.
func TestPlacesKeptForTheSameRequestOnly(t *testing.T) {
	t.Parallel()
	first := time.Now().UnixMicro() - 1000 // 1ms ago
	one := service.OrderRequest{SKUID: 7, UserID: "u", IdempotencyKey: "k", Quantity: 1}
	five := one
	five.Quantity = 5

	p := newPlaces(100, comeBackAfter+5*time.Second, nil, nil)
	p.comeBack(one, first, service.ErrBusy)
	if got := p.arrival(five); got <= first {
		t.Errorf("arrival(same key, quantity 5) = %d after a place for quantity 1 (arrived %d); want a new arrival", got, first)
	}
	if got := p.ahead(7); got != noLimit {
		t.Errorf("ahead(sku 7) = %d once the buyer came back with another body; want noLimit", got)
	}
	if got := p.arrival(one); got != first {
		t.Errorf("arrival(the request told 429) = %d; want its place, %d", got, first)
	}
	second := first + 500
	p.comeBack(five, second, service.ErrBusy) // told 429 for five: that request's place now
	if got := p.arrival(five); got != second {
		t.Errorf("arrival(quantity 5, told 429 in turn) = %d; want its own place, %d", got, second)
	}
	if got := p.arrival(one); got == first {
		t.Errorf("arrival(quantity 1) = %d, the place the key's later request replaced; want a new arrival", got)
	}

	board := newPlaces(100, comeBackAfter+5*time.Second, nil, nil)
	board.learn([]Place{{SKUID: 7, UserID: "u", Key: "k", Quantity: 1, Arrived: first, Expires: first + 6e6, Busy: true}})
	if got := board.arrival(five); got <= first {
		t.Errorf("arrival(same key, quantity 5) = %d after the board's place for quantity 1; want a new arrival", got)
	}

	old := newPlaces(100, comeBackAfter+5*time.Second, nil, nil)
	old.learn([]Place{{SKUID: 7, UserID: "u", Key: "k", Arrived: first, Expires: first + 6e6, Busy: true}})
	if got := old.arrival(five); got != first {
		t.Errorf("arrival(quantity 5) = %d after a place without a quantity; want it kept, %d", got, first)
	}
}

// TestPlacesAheadSkipsLapsedPlaces: a place that has lapsed holds nobody
// up, whatever order.place_grace. At 0 a place lapses when its buyer's
// Retry-After does, before the hold of a buyer who never came back ends.
func TestPlacesAheadSkipsLapsedPlaces(t *testing.T) {
	t.Parallel()
	p := newPlaces(100, comeBackAfter, nil, nil) // order.place_grace 0
	now := time.Now().UnixMicro()
	told := Place{SKUID: 7, UserID: "u", Key: "k", Quantity: 1, Arrived: now - 1000, Expires: now + 1000, Busy: true}
	p.learn([]Place{told})
	for time.Now().UnixMicro() <= told.Expires { // the place's 1ms runs out
		runtime.Gosched()
	}
	if got := p.ahead(7); got != noLimit {
		t.Errorf("ahead(sku 7) = %d with its only place lapsed; want noLimit", got)
	}
}

// BenchmarkPlaces is the order path's cost of places with the table full
// (order.places_max, 50,000 places of one SKU, all holding the line):
// arrival for a keyed request that has no place ("miss") and for one
// that has ("hit"), and ahead, which each turn of the SKU's worker asks.
func BenchmarkPlaces(b *testing.B) {
	const n = 50000
	p := newPlaces(n, comeBackAfter+5*time.Second, nil, nil)
	first := time.Now().UnixMicro() - 1000
	reqs := make([]service.OrderRequest, n)
	for i := range reqs {
		reqs[i] = service.OrderRequest{SKUID: 7, UserID: "u" + strconv.Itoa(i), IdempotencyKey: "k", Quantity: 1}
		p.comeBack(reqs[i], first+int64(i), service.ErrBusy)
	}
	b.Run("arrival/miss", func(b *testing.B) {
		r := service.OrderRequest{SKUID: 7, UserID: "stranger", IdempotencyKey: "k", Quantity: 1}
		for b.Loop() {
			p.arrival(r)
		}
	})
	b.Run("ahead", func(b *testing.B) {
		for b.Loop() {
			p.ahead(7)
		}
	})
	b.Run("arrival/hit", func(b *testing.B) {
		i := 0
		for b.Loop() {
			p.arrival(reqs[i%n])
			i++
		}
	})
}
