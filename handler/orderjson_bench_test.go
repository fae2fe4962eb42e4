package handler

import (
	"testing"
	"time"

	ginjson "github.com/gin-gonic/gin/codec/json"

	"github.com/seckill/seckill/internal/orderid"
	"github.com/seckill/seckill/service"
)

// BenchmarkOrderJSON is one order answer's body: the hand-written encoder
// beside the JSON library Gin is built with (encoding/json; goccy/go-json
// with -tags go_json; sonic with -tags sonic).
func BenchmarkOrderJSON(b *testing.B) {
	ids, err := orderid.New([]byte("0123456789abcdef"))
	if err != nil {
		b.Fatal(err)
	}
	at := time.Date(2026, 11, 11, 0, 0, 0, 123456000, time.UTC)
	due := at.Add(15 * time.Minute)
	o := service.Order{ID: 42, SKUID: 7, UserID: "bench-123456", Quantity: 1, CreatedAt: at, Status: service.OrderPending, ExpiresAt: &due}
	b.Run("hand-written", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = appendOrder(make([]byte, 0, 192), ids, o)
		}
	})
	b.Run("library", func(b *testing.B) {
		b.Logf("%s", ginjson.Package)
		b.ReportAllocs()
		for b.Loop() {
			if _, err := ginjson.API.Marshal(orderJSON(ids, o)); err != nil {
				b.Fatal(err)
			}
		}
	})
}
