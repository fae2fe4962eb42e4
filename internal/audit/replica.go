package audit

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
)

// Books is a SKU's books as one server holds them: the row's numbers and
// a summary of its orders.
type Books struct {
	Stock, Sold, Version int64
	Orders, Units        int64 // every order row of the SKU and their quantity
	LastOrder            int64 // the highest order id
	// Digest folds every order's id, buyer, quantity, key and status
	// (BIT_XOR of CRC32s): the same counts with other orders differ here.
	Digest int64
}

// Difference is a SKU whose books differ between the primary and a
// replica; a SKU one of them lacks has nil books there.
type Difference struct {
	SKU     int64  `json:"sku"`
	Primary *Books `json:"primary"`
	Replica *Books `json:"replica"`
}

// CaughtUp says whether the replica had the primary's position when the
// books were read: when it had not, differences may be commits in flight.
type CaughtUp struct {
	PrimaryAt string `json:"primary_gtid"`
	Waited    bool   `json:"caught_up"`
}

// CompareReplica compares every SKU's books on primary and replica. It
// first waits, at most wait, for the replica to apply the primary's
// position (MASTER_GTID_WAIT), so that commits in flight are not taken
// for a divergence; the replica losing acknowledged orders after a
// failover, or a replica that forked, shows as the SKUs it names.
func CompareReplica(ctx context.Context, primary, replica *sql.DB, waitSeconds float64) ([]Difference, CaughtUp, error) {
	var cu CaughtUp
	if err := primary.QueryRowContext(ctx, "SELECT @@gtid_binlog_pos").Scan(&cu.PrimaryAt); err != nil {
		return nil, cu, fmt.Errorf("audit: the primary's position: %w", err)
	}
	if cu.PrimaryAt != "" {
		var res sql.NullInt64
		if err := replica.QueryRowContext(ctx, "SELECT MASTER_GTID_WAIT(?, ?)", cu.PrimaryAt, waitSeconds).Scan(&res); err != nil {
			return nil, cu, fmt.Errorf("audit: wait for the replica: %w", err)
		}
		cu.Waited = res.Valid && res.Int64 == 0
	}
	p, err := books(ctx, primary)
	if err != nil {
		return nil, cu, fmt.Errorf("audit: the primary's books: %w", err)
	}
	r, err := books(ctx, replica)
	if err != nil {
		return nil, cu, fmt.Errorf("audit: the replica's books: %w", err)
	}
	var diffs []Difference
	for id, pb := range p {
		rb, ok := r[id]
		if !ok || rb != pb {
			d := Difference{SKU: id, Primary: &pb}
			if ok {
				d.Replica = &rb
			}
			diffs = append(diffs, d)
		}
	}
	for id, rb := range r {
		if _, ok := p[id]; !ok {
			diffs = append(diffs, Difference{SKU: id, Replica: &rb})
		}
	}
	sort.Slice(diffs, func(i, j int) bool { return diffs[i].SKU < diffs[j].SKU })
	return diffs, cu, nil
}

// books reads every SKU's books in one read-only snapshot.
func books(ctx context.Context, db *sql.DB) (map[int64]Books, error) {
	tx, err := begin(ctx, db)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	out := map[int64]Books{}
	rows, err := tx.QueryContext(ctx, "SELECT id, stock, sold, version FROM skus")
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var id int64
		var b Books
		if err := rows.Scan(&id, &b.Stock, &b.Sold, &b.Version); err != nil {
			rows.Close()
			return nil, err
		}
		out[id] = b
	}
	if err := rows.Close(); err != nil {
		return nil, err
	}
	rows, err = tx.QueryContext(ctx, "SELECT sku_id, COUNT(*), COALESCE(SUM(quantity), 0), COALESCE(MAX(id), 0), "+
		"BIT_XOR(CRC32(CONCAT_WS(',', id, user_id, quantity, idempotency_key, status))) FROM orders GROUP BY sku_id")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var id, n, units, last, digest int64
		if err := rows.Scan(&id, &n, &units, &last, &digest); err != nil {
			return nil, err
		}
		b := out[id]
		b.Orders, b.Units, b.LastOrder, b.Digest = n, units, last, digest
		out[id] = b
	}
	return out, rows.Err()
}
