package repository_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/procstat"
	"github.com/seckill/seckill/service"
)

// BenchmarkCommitBatch commits batches of n orders for one SKU: the cost
// that one lock hold amortises over n buyers.
func BenchmarkCommitBatch(b *testing.B) {
	for _, n := range []int{1, 16, 64, 256} {
		b.Run(fmt.Sprintf("batch=%d", n), func(b *testing.B) {
			_, s, sku := setupB(b, int64(b.N*n+1), 1)
			ctx := context.Background()
			users := 0
			b.ResetTimer()
			for range b.N {
				bt := service.Batch{SKUID: sku.ID, Now: time.Now().UTC()}
				for range n {
					users++
					bt.Requests = append(bt.Requests, service.OrderRequest{SKUID: sku.ID, UserID: fmt.Sprintf("u-%d", users), Quantity: 1})
				}
				if _, err := s.CommitBatch(ctx, bt); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "orders/s")
		})
	}
}

// BenchmarkCommitBatch_Known commits batches of n orders for one SKU as a
// lock holder does after its first: each decided on the row the previous
// commit left (Batch.Known, two round trips), fenced, with the orders
// pending payment as the service's defaults make them. It reports
// MariaDB's CPU per transaction and per order from its /proc counter (the
// server is shared: other work on it counts), and this process's CPU per
// order: what a transaction costs whatever its size, which a batch of n
// orders divides by n. The gap cases leave the pause between two commits
// that a moderate load leaves (12 orders every 7 ms is 1,700 orders/s):
// a transaction that finds both processes idle costs each of them more
// than one that follows another at once. Run it with a fixed count on a
// quiet box, e.g.
//
//	go test -run '^$' -bench CommitBatch_Known -benchtime 1500x ./repository/
func BenchmarkCommitBatch_Known(b *testing.B) {
	cases := []struct {
		n   int
		gap time.Duration
	}{{1, 0}, {4, 0}, {12, 0}, {40, 0}, {100, 0}, {12, 7 * time.Millisecond}}
	for _, c := range cases {
		name := fmt.Sprintf("batch=%d", c.n)
		if c.gap > 0 {
			name += fmt.Sprintf("/gap=%v", c.gap)
		}
		b.Run(name, func(b *testing.B) {
			n := c.n
			_, s, sku := setupB(b, int64(b.N*n), 1)
			dbPID, err := procstat.MariaDB()
			if err != nil {
				dbPID = -1 // not here: its metrics are left out
			}
			ctx := context.Background()
			users, skipped := 0, 0
			known := &sku
			cpu0, db0 := cpuOf(procstat.Self), cpuOf(dbPID)
			b.ResetTimer()
			for range b.N {
				if c.gap > 0 {
					time.Sleep(c.gap) // the load's pace, not a synchronisation
				}
				bt := service.Batch{SKUID: sku.ID, Fence: 1, Now: time.Now().UTC(), PaymentTimeout: 15 * time.Minute, Known: known}
				for range n {
					users++
					bt.Requests = append(bt.Requests, service.OrderRequest{SKUID: sku.ID, UserID: "u-" + strconv.Itoa(users), Quantity: 1})
				}
				res, err := s.CommitBatch(ctx, bt)
				if err != nil {
					b.Fatal(err)
				}
				if res.ReadsSkipped {
					skipped++
				}
				known = &res.SKU
			}
			b.StopTimer()
			cpu, dbCPU := cpuOf(procstat.Self)-cpu0, cpuOf(dbPID)-db0
			after, err := s.SKU(ctx, sku.ID) // the database, not the last batch's word
			if err != nil {
				b.Fatal(err)
			}
			if after.Sold != int64(users) || after.Stock != 0 {
				b.Fatalf("sold %d, stock %d after %d orders; want all sold", after.Sold, after.Stock, users)
			}
			if skipped < b.N-1 { // the first may read: its known row is the one CreateSKU returned
				b.Fatalf("%d of %d batches were decided on their known row; want all but the first", skipped, b.N)
			}
			orders := float64(b.N * n)
			b.ReportMetric(float64(cpu.Microseconds())/orders, "µs-cpu/order")
			if dbPID > 0 {
				b.ReportMetric(float64(dbCPU.Microseconds())/float64(b.N), "µs-mariadb/txn")
				b.ReportMetric(float64(dbCPU.Microseconds())/orders, "µs-mariadb/order")
			}
		})
	}
}

// cpuOf is pid's CPU time so far; 0 where /proc cannot tell.
func cpuOf(pid int) time.Duration {
	d, _ := procstat.CPU(pid)
	return d
}
