package verify

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"
)

// CheckDB reads SKU skuID from db and checks it: the one call a test or a
// script needs. The error is about reading; violations are in the Report.
func CheckDB(ctx context.Context, db *sql.DB, skuID int64, want Expect) (Report, error) {
	s, err := FromDB(ctx, db, skuID)
	if err != nil {
		return Report{}, err
	}
	return Check(s, want), nil
}

// FromDB reads SKU skuID, its orders and its user_purchases in one
// consistent read (a REPEATABLE READ transaction), so a sale still running
// shows a coherent state rather than a torn one.
func FromDB(ctx context.Context, db *sql.DB, skuID int64) (Snapshot, error) {
	s := Snapshot{Source: "database", HasTotal: true, Purchases: map[string]int64{}}
	tx, err := db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true})
	if err != nil {
		return s, fmt.Errorf("verify: begin: %w", err)
	}
	// The transaction only reads: its rollback cannot lose anything.
	defer tx.Rollback()

	err = tx.QueryRowContext(ctx,
		`SELECT id, total_stock, stock, sold, per_user_limit FROM skus WHERE id = ?`, skuID).
		Scan(&s.SKU.ID, &s.SKU.TotalStock, &s.SKU.Stock, &s.SKU.Sold, &s.SKU.PerUserLimit)
	if errors.Is(err, sql.ErrNoRows) {
		return s, fmt.Errorf("%w: %d", ErrNotFound, skuID)
	}
	if err != nil {
		return s, fmt.Errorf("verify: read sku %d: %w", skuID, err)
	}

	// A database of a build before the waitlist (make bench -ab-ref) has
	// no waiters: its orders read as never having waited.
	waitlist := "joined_version IS NOT NULL, allocated_at"
	var cols int
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.columns
		WHERE table_schema = DATABASE() AND table_name = 'orders' AND column_name = 'joined_version'`).Scan(&cols); err != nil || cols == 0 {
		waitlist = "FALSE, NULL"
	}
	rows, err := tx.QueryContext(ctx, `SELECT id, user_id, quantity, COALESCE(idempotency_key, ''), created_at, status, settled_at, `+
		waitlist+` FROM orders WHERE sku_id = ? ORDER BY id`, skuID)
	if err != nil {
		return s, fmt.Errorf("verify: read orders: %w", err)
	}
	for rows.Next() {
		var o Order
		// A string scans whether or not the DSN sets parseTime.
		var created string
		var settled, allocated sql.NullString
		if err := rows.Scan(&o.ID, &o.UserID, &o.Quantity, &o.IdempotencyKey, &created, &o.Status, &settled, &o.Waited, &allocated); err != nil {
			rows.Close()
			return s, fmt.Errorf("verify: read orders: %w", err)
		}
		o.CreatedAt = parseTime(created)
		if t := parseTime(settled.String); settled.Valid && !t.IsZero() {
			o.SettledAt = &t
		}
		if t := parseTime(allocated.String); allocated.Valid && !t.IsZero() {
			o.AllocatedAt = &t
		}
		s.Orders = append(s.Orders, o)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return s, fmt.Errorf("verify: read orders: %w", err)
	}

	rows, err = tx.QueryContext(ctx, `SELECT user_id, quantity FROM user_purchases WHERE sku_id = ?`, skuID)
	if err != nil {
		return s, fmt.Errorf("verify: read user_purchases: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var u string
		var q int64
		if err := rows.Scan(&u, &q); err != nil {
			return s, fmt.Errorf("verify: read user_purchases: %w", err)
		}
		s.Purchases[u] = q
	}
	if err := rows.Err(); err != nil {
		return s, fmt.Errorf("verify: read user_purchases: %w", err)
	}
	return s, nil
}

// maxPages bounds the walk through the admin order list (at 500 a page, a
// million orders), so a server that never ends its list cannot hang a run.
const maxPages = 2000

// FromAPI reads SKU skuID and pages through its orders with the admin API at
// baseURL, each page read into v by get (an authorized GET that fails
// unless answered 200). user_purchases is not visible there, so it is not
// checked.
func FromAPI(ctx context.Context, get func(ctx context.Context, url string, v any) error, baseURL string, skuID int64) (Snapshot, error) {
	s := Snapshot{Source: "api"}
	base := strings.TrimRight(baseURL, "/")
	var sku struct {
		SKU
		TotalStock *int64 `json:"total_stock"` // nil when not shown (see HasTotal)
	}
	if err := get(ctx, fmt.Sprintf("%s/admin/v1/skus/%d", base, skuID), &sku); err != nil {
		return s, fmt.Errorf("verify: %w", err)
	}
	s.SKU = sku.SKU
	if sku.TotalStock != nil {
		s.SKU.TotalStock, s.HasTotal = *sku.TotalStock, true
	}

	after := ""
	for range maxPages {
		q := url.Values{"limit": {"500"}}
		if after != "" {
			q.Set("after", after)
		}
		var page struct {
			Orders []struct {
				ID             int64     `json:"id"` // internal; order_id is the shoppers' opaque id
				UserID         string    `json:"user_id"`
				Quantity       int64     `json:"quantity"`
				IdempotencyKey string    `json:"idempotency_key"`
				CreatedAt      time.Time `json:"created_at"`
				Status         string    `json:"status"`
			} `json:"orders"`
			NextAfter *string `json:"next_after"` // an opaque cursor
		}
		if err := get(ctx, fmt.Sprintf("%s/admin/v1/skus/%d/orders?%s", base, skuID, q.Encode()), &page); err != nil {
			return s, fmt.Errorf("verify: %w", err)
		}
		for _, o := range page.Orders {
			if o.ID == 0 {
				return s, errors.New("verify: the admin order list gives no internal id")
			}
			s.Orders = append(s.Orders, Order{ID: o.ID, UserID: o.UserID, Quantity: o.Quantity, IdempotencyKey: o.IdempotencyKey, CreatedAt: o.CreatedAt, Status: o.Status})
		}
		if page.NextAfter == nil || len(page.Orders) == 0 {
			return s, nil
		}
		next := *page.NextAfter
		if next == after {
			return s, fmt.Errorf("verify: admin order list repeats the page after %s", after)
		}
		after = next
	}
	return s, fmt.Errorf("verify: admin order list longer than %d pages", maxPages)
}

// parseTime reads a DATETIME as the driver renders it, with parseTime
// (RFC 3339) or without; only differences between times are used, so the
// zone does not matter. An unreadable time is zero.
func parseTime(v string) time.Time {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02 15:04:05.999999"} {
		if t, err := time.Parse(layout, v); err == nil {
			return t
		}
	}
	return time.Time{}
}
