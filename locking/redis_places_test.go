package locking_test

import (
	"context"
	"testing"
	"time"

	"github.com/seckill/seckill/engine"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/locking"
)

// TestRedisMarks_PlacesCarryTheirQuantity: a place posted on the board
// reaches the other instances with its request's quantity, which makes
// another body under its key a new arrival; a message of an earlier
// version, without one, still reads, as a place for any quantity (0).
func TestRedisMarks_PlacesCarryTheirQuantity(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	m := locking.NewRedisMarks(rdb, prefix+"soldout:", time.Minute)
	heard := make(chan []engine.Place, 4)
	stop := m.Listen(func(ps []engine.Place) { heard <- ps })
	t.Cleanup(stop)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	channel := prefix + "soldout:places"
	for { // the subscription is made in the background: wait until Redis counts it
		n, err := rdb.PubSubNumSub(ctx, channel).Result()
		if err != nil {
			t.Fatalf("PUBSUB NUMSUB: %v", err)
		}
		if n[channel] == 1 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}

	sent := engine.Place{SKUID: 7, UserID: "u", Key: "k", Quantity: 5, Arrived: 1, Expires: 2, Busy: true}
	if err := m.Post(ctx, []engine.Place{sent}); err != nil {
		t.Fatalf("Post: %v", err)
	}
	if got := receive(t, ctx, heard); len(got) != 1 || got[0] != sent {
		t.Errorf("heard %+v; want %+v", got, sent)
	}

	old := `[{"SKUID":7,"UserID":"u","Key":"k","Arrived":1,"Expires":2,"Busy":true,"Back":false}]`
	if err := rdb.Publish(ctx, channel, old).Err(); err != nil {
		t.Fatalf("PUBLISH: %v", err)
	}
	want := engine.Place{SKUID: 7, UserID: "u", Key: "k", Arrived: 1, Expires: 2, Busy: true}
	if got := receive(t, ctx, heard); len(got) != 1 || got[0] != want {
		t.Errorf("heard %+v from an earlier version's message; want %+v", got, want)
	}
}

func receive(t *testing.T, ctx context.Context, heard <-chan []engine.Place) []engine.Place {
	t.Helper()
	select {
	case ps := <-heard:
		return ps
	case <-ctx.Done():
		t.Fatal("nothing heard on the board")
		return nil
	}
}
