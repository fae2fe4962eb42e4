package service

import "time"

// AgeSoldOutMark makes sku's local sold-out mark in d look confirmed age
// earlier: the instance sat idle that long, without the test waiting.
func AgeSoldOutMark(d *Directory, skuID int64, age time.Duration) {
	if e := d.peek(skuID); e != nil {
		e.confirmed.Add(-int64(age))
	}
}

// RowReadWaiters reports how many callers joined the re-read of sku's row
// in flight in d (0 when none is).
func RowReadWaiters(d *Directory, skuID int64) int {
	if e := d.peek(skuID); e != nil {
		if r := e.reading.Load(); r != nil {
			return int(r.waiters.Load())
		}
	}
	return 0
}

// AgeSaleWindow makes the sale window of sku held by d look read age
// earlier.
func AgeSaleWindow(d *Directory, skuID int64, age time.Duration) {
	if e := d.peek(skuID); e != nil {
		if w := e.window.Load(); w != nil && w != unbounded {
			aged := *w
			aged.read -= int64(age)
			e.window.Store(&aged)
		}
	}
}

// RowRead returns the end of the re-read of sku's row in flight in d, or
// nil when none is.
func RowRead(d *Directory, skuID int64) <-chan struct{} {
	if e := d.peek(skuID); e != nil {
		if r := e.reading.Load(); r != nil {
			return r.done
		}
	}
	return nil
}

// SoldOutConfirmed returns when the row read or commit that set sku's
// local mark in d began.
func SoldOutConfirmed(d *Directory, skuID int64) time.Time {
	if e := d.peek(skuID); e != nil {
		return time.Unix(0, e.confirmed.Load())
	}
	return time.Time{}
}
