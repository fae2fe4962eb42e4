package testenv

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/seckill/seckill/internal/testenv/eventcheck"
)

// Event is one event of the outbox as the tests read it (a row expanded:
// service.EventRun).
type Event = eventcheck.Event

// CheckEvents asserts the outbox's invariant (docs/design.md, invariant
// 21) over every order of the database (eventcheck.Outbox) and returns
// the events in id order, a run's in its orders' order.
func CheckEvents(t testing.TB, db *gorm.DB) []Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	evs, breaches, err := eventcheck.Outbox(ctx, sqlDB(t, db))
	if err != nil {
		t.Fatalf("CheckEvents: %v", err)
	}
	for _, b := range breaches {
		t.Error(b)
	}
	return evs
}

// CheckStream asserts that stream, on the NATS server at url, replayed
// from its first message and deduplicated by event id, is the outbox of
// db (eventcheck.Stream: decode turns the order id shoppers see into the
// row's). Call it once the outbox is all published and nothing is
// pruned. It returns how many messages the stream holds, republications
// included.
func CheckStream(t testing.TB, db *gorm.DB, url, stream string, decode func(string) (int64, bool)) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rep, err := eventcheck.Stream(ctx, sqlDB(t, db), url, stream, decode)
	if err != nil {
		t.Fatalf("CheckStream: %v", err)
	}
	for _, b := range rep.Breaches {
		t.Error(b)
	}
	return rep.Messages
}

func sqlDB(t testing.TB, db *gorm.DB) *sql.DB {
	t.Helper()
	s, err := db.DB()
	if err != nil {
		t.Fatal(err)
	}
	return s
}
