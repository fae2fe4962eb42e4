package service

import (
	"testing"
	"time"
)

// A read of a SKU's row begun before a restock made through this
// instance, and answered after it, must not take the restock back: the
// restock's mark (in stock, newer version) stays, or buyers would be told
// sold out for up to sold_out.recheck with units on sale. A newer version
// held from before the read began is replaced (a database restored from a
// backup): the database is the truth.
func TestObserve_AReadNeverTakesBackWhatCameAfterIt(t *testing.T) {
	t.Parallel()
	ends := time.Now().Add(-time.Hour)
	var e skuEntry
	e.observe(SKU{ID: 7, Stock: 0, Version: 2}, 100)                // sold out, read at 100
	e.observe(SKU{ID: 7, Stock: 5, Version: 3}, 300)                // restocked here, learned at 300
	e.observe(SKU{ID: 7, Stock: 0, Version: 2, EndsAt: &ends}, 200) // a read begun at 200, answered now
	if m := e.mark.Load(); m != -3 {
		t.Errorf("mark after a late answer to an earlier read = %d; want -3 (in stock at version 3)", m)
	}
	if w := e.window.Load(); w == nil || !w.open(time.Now().UnixNano()) {
		t.Errorf("window after a late answer to an earlier read = %+v; want the restock's (open)", w)
	}
	if c := e.confirmed.Load(); c != 300 {
		t.Errorf("confirmed = %d; want 300", c)
	}
	// Restored from a backup: version 1, read after all of the above.
	e.observe(SKU{ID: 7, Stock: 0, Version: 1}, 400)
	if m := e.mark.Load(); m != 1 {
		t.Errorf("mark after reading a restored row = %d; want 1 (sold out at version 1)", m)
	}
}
