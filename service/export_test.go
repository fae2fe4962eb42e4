package service

import "time"

// AgeSoldOutMark makes sku's local sold-out mark on o look confirmed d
// earlier: the instance sat idle that long, without the test waiting.
func AgeSoldOutMark(o *Orders, skuID int64, d time.Duration) {
	if e := o.skus.peek(skuID); e != nil {
		e.confirmed.Add(-int64(d))
	}
}

// RowReadWaiters reports how many callers joined the re-read of sku's row
// in flight on o (0 when none is).
func RowReadWaiters(o *Orders, skuID int64) int {
	if e := o.skus.peek(skuID); e != nil {
		if r := e.reading.Load(); r != nil {
			return int(r.waiters.Load())
		}
	}
	return 0
}

// AgeSaleWindow makes the sale window of sku held by o look read d
// earlier.
func AgeSaleWindow(o *Orders, skuID int64, d time.Duration) {
	if e := o.skus.peek(skuID); e != nil {
		if w := e.window.Load(); w != nil && w != unbounded {
			aged := *w
			aged.read -= int64(d)
			e.window.Store(&aged)
		}
	}
}
