package engine

import (
	"context"
	"testing"
	"time"

	"github.com/seckill/seckill/service"
)

// The round linger waits only when other SKUs' batches are coming that
// would at least double the round: never for one SKU on its own, a stream
// that stopped, a SKU that came once long ago, or SKUs already in the
// round.
func TestWorthLingering(t *testing.T) {
	const linger = 5 * time.Millisecond
	ms := int64(time.Millisecond)
	leaderOf := func(sku int64) *groupCall { return &groupCall{ctx: context.Background(), b: service.Batch{SKUID: sku}} }
	// stream gives 200 batches, gap apart, of the SKUs skuOf names; now is
	// after the last.
	stream := func(gap int64, skuOf func(i int) int64, after int64) func(*groupCommit) int64 {
		return func(g *groupCommit) int64 {
			at := int64(0)
			for i := range 200 {
				at += gap
				g.arrived(skuOf(i), at)
			}
			return at + after
		}
	}
	cycle := func(n int) func(int) int64 { return func(i int) int64 { return int64(i%n + 1) } }
	hotAndOnce := func(i int) int64 {
		if i == 150 {
			return 2
		}
		return 1
	}
	tests := []struct {
		name        string
		linger      time.Duration
		arrivals    func(g *groupCommit) (now int64)
		pending     []int64 // SKUs of the calls already waiting for the round
		leader      int64
		want        bool
		wantJoiners int // when want
	}{
		// The ring holds the latest 64 batches, of SKUs 37-100, over the
		// last 31.5ms: each is expected 5/31.5 times within the linger.
		{name: "100 SKUs, a batch every 0.5ms", linger: linger, leader: 1, want: true, wantJoiners: 10,
			arrivals: stream(ms/2, cycle(100), 0)},
		{name: "the same, the leader's round already as large as those expected", linger: linger, leader: 1,
			pending:  []int64{37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47}, // 53 others: 8.4 expected, fewer than 12
			arrivals: stream(ms/2, cycle(100), 0)},
		{name: "the same, stopped a second ago", linger: linger, leader: 1,
			arrivals: stream(ms/2, cycle(100), 1000*ms)},
		{name: "the same, order.linger 0", linger: 0, leader: 1,
			arrivals: stream(ms/2, cycle(100), 0)},
		{name: "one SKU, a batch every 0.1ms", linger: linger, leader: 1,
			arrivals: stream(ms/10, cycle(1), 0)},
		{name: "a hot SKU and another that came once", linger: linger, leader: 1,
			arrivals: stream(2*ms, hotAndOnce, 0)},
		{name: "two hot SKUs, the other not in the round yet", linger: linger, leader: 1, want: true, wantJoiners: 1,
			arrivals: stream(ms, cycle(2), 0)},
		{name: "two hot SKUs, both in the round", linger: linger, leader: 1, pending: []int64{2},
			arrivals: stream(ms, cycle(2), 0)},
		// The third alone would not double a round of two.
		{name: "three hot SKUs, two in the round", linger: linger, leader: 1, pending: []int64{2},
			arrivals: stream(ms, cycle(3), 0)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := &groupCommit{linger: tt.linger}
			now := tt.arrivals(g)
			leader := leaderOf(tt.leader) // a leader is never in pending
			for _, sku := range tt.pending {
				g.pending = append(g.pending, leaderOf(sku))
			}
			joiners, ok := g.worthLingering(leader, now)
			if ok != tt.want || (ok && joiners != tt.wantJoiners) {
				t.Errorf("worthLingering = %d, %v; want %d, %v", joiners, ok, tt.wantJoiners, tt.want)
			}
		})
	}
}
