package engine

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
)

// placeBytes bounds the live heap one place of order.places_max may cost,
// with the whole table full and its lines at their bound: its entry, its
// turns in the expiry order and in its SKU's line, a short user id and a
// 36-character key, and the places since evicted whose stale turns the
// lines keep until they are compacted (measured: 250 to 530 bytes;
// docs/operations.md states the figures).
const placeBytes = 600

// TestPlacesHoldTheirMemoryToPlacesMax: the whole table, every SKU's line
// and the places learned from the board included, stays within
// order.places_max. Eight SKUs' places arrive as the board brings them on
// an instance with no worker for those SKUs (so nothing trims a line on
// the order path), each heard twice (the poster hears its own post, in a
// fresh copy): the live heap grows by less than placeBytes per place of
// places_max. At a test's size the table is filled 24 times over; at the
// default, twice, which fills the lines to their bound (2×max: the most
// the table holds), and takes seconds under -race.
func TestPlacesHoldTheirMemoryToPlacesMax(t *testing.T) {
	// Not parallel: the live heap is the whole process's.
	for _, tc := range []struct{ max, perSKU int }{{5000, 3 * 5000}, {50000, 50000 / 4}} {
		max := tc.max
		t.Run(fmt.Sprintf("places_max=%d", max), func(t *testing.T) {
			if testing.Short() && max > 5000 {
				t.Skip("the default's size in -short")
			}
			before := liveHeap()
			p := newPlaces(max, comeBackAfter+time.Minute, nil, nil)
			fillFromTheBoard(p, 8, tc.perSKU)
			after := liveHeap()
			grown := int64(after) - int64(before)
			p.mu.Lock()
			entries, lined, lines := len(p.byKey), 0, len(p.line)
			for _, l := range p.line {
				lined += len(l)
			}
			fifo := len(p.fifo)
			p.mu.Unlock()
			t.Logf("places_max %d: live heap grew %d bytes (%d a place); %d places, %d in %d lines, %d in the expiry order",
				max, grown, grown/int64(max), entries, lined, lines, fifo)
			if entries > max {
				t.Errorf("%d places remembered; want at most places_max, %d", entries, max)
			}
			if grown > int64(placeBytes*max) {
				t.Errorf("live heap grew %d bytes (%d a place of places_max %d); want under %d a place",
					grown, grown/int64(max), max, placeBytes)
			}
			runtime.KeepAlive(p)
		})
	}
}

// fillFromTheBoard has p learn perSKU places of each of skus SKUs, all
// told busy, in batches as the board brings them, each batch heard again
// in a fresh copy (the poster hears its own post). They are told a minute
// ahead (a poster's clock ahead of ours), so that each holds the line
// however slowly the test runs.
func fillFromTheBoard(p *places, skus, perSKU int) {
	now := time.Now().UnixMicro()
	expires := now + time.Minute.Microseconds() + p.keep.Microseconds()
	batch := make([]Place, 0, placeBatch)
	echo := make([]Place, 0, placeBatch)
	flush := func() {
		p.learn(batch)
		for _, pl := range batch {
			pl.UserID, pl.Key = strings.Clone(pl.UserID), strings.Clone(pl.Key)
			echo = append(echo, pl)
		}
		p.learn(echo)
		batch, echo = batch[:0], echo[:0]
	}
	for i := range perSKU {
		for sku := range skus {
			n := i*skus + sku
			batch = append(batch, Place{
				SKUID: int64(sku + 1), UserID: fmt.Sprintf("u-%d", n),
				Key:     fmt.Sprintf("%08x-0000-4000-8000-%012x", n, n),
				Arrived: now - int64(perSKU) + int64(i), Expires: expires, Busy: true, Quantity: 1,
			})
			if len(batch) == placeBatch {
				flush()
			}
		}
	}
	flush()
}

// liveHeap returns the bytes of live objects on the heap.
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC() // a second cycle frees what the first one's finalizers let go
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
