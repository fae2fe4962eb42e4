package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/seckill/seckill/internal/audit"
	"github.com/seckill/seckill/internal/config"
	"github.com/seckill/seckill/internal/database"
	"github.com/seckill/seckill/internal/mysqlerr"
)

const auditUsage = `Usage: seckill audit [-sku N] [-json] [-replica DSN] [-config file.yaml]

Reconciles every SKU (or SKU N) in the database of mysql.dsn (SECKILL_MYSQL_DSN):
the skus row, the orders by status, the buyers' holdings, the idempotency
keys and the waitlist, each SKU in one read-only snapshot; it only reads, so
a user granted SELECT suffices. Prints one row per SKU, or with -json one JSON document:
STOCK, SOLD and the *_UNITS columns count units, the *_ORDERS columns
orders by status, BUYERS the holdings, KEYED the idempotency keys.
With events.enabled it also checks that every order created in the last
events.retention has one event per committed change of it, in order, and
none else (events_tell_changes).

With -replica DSN it compares instead that replica's books with the primary's
(every SKU's stock, sold, version, order count, units, last order id and a
digest of its orders' ids, buyers, quantities, keys and statuses), after
waiting up to 10s for the replica to apply the primary's position, and names
the SKUs that differ: after a failover, the orders the promoted server lacks.

Exit status: 0 every invariant holds (with -replica: the books agree); 1 a SKU
fails one or differs (each is named); 2 a usage, configuration or database
error, or nothing to audit (no seckill schema, no SKU).
`

// auditFlags are the audit command's own flags.
type auditFlags struct {
	sku     int64
	json    bool
	replica string // a replica's DSN: compare its books instead
}

// exitError carries the process's exit status for an error other than 1.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// exitCode returns the exit status of run's error: 0 for none, the
// exitError's code, 1 otherwise.
func exitCode(err error) int {
	var ee *exitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.code
	}
	return 1
}

func usageError(err error) error { return &exitError{code: 2, err: err} }

// maxNamed bounds the failed SKUs the final error names; every one is
// named in the output above it.
const maxNamed = 20

// runAudit audits the SKUs of cfg's database, writing a table or JSON to
// stdout. A failed invariant exits 1; anything that stops the audit, 2.
func runAudit(ctx context.Context, cfg config.Config, f auditFlags, stdout io.Writer) error {
	if cfg.Embedded() {
		return usageError(errors.New("audit: SECKILL_MYSQL_DSN (mysql.dsn) is required: the audit reads MySQL/MariaDB"))
	}
	// One snapshot at a time: the audit holds one connection.
	db, err := database.OpenMySQL(cfg.MySQL.DSN, database.Options{MaxOpenConns: 1, MaxIdleConns: 1, ConnMaxLife: time.Minute})
	if err != nil {
		return usageError(fmt.Errorf("audit: %w", err))
	}
	defer database.Close(db)
	sqlDB, err := db.DB()
	if err != nil {
		return usageError(err)
	}
	if err := sqlDB.PingContext(ctx); err != nil {
		return usageError(fmt.Errorf("audit: %w", err))
	}

	if f.replica != "" {
		return compareReplica(ctx, sqlDB, f.replica, f.json, stdout)
	}
	if err := auditable(ctx, sqlDB, f.sku); err != nil {
		return usageError(err)
	}
	var opts []audit.Option
	if cfg.Events.Enabled {
		opts = append(opts, audit.WithEvents(cfg.Events.Retention))
	}
	out := newAuditWriter(stdout, f.json)
	if f.sku != 0 {
		r, err := audit.SKU(ctx, sqlDB, f.sku, opts...)
		if err != nil { // before any output: no such SKU prints the error alone
			return usageError(err)
		}
		if err := out.begin(); err != nil {
			return usageError(err)
		}
		if err := out.add(r); err != nil {
			return usageError(err)
		}
	} else {
		if err := out.begin(); err != nil {
			return usageError(err)
		}
		if err := audit.All(ctx, sqlDB, 0, out.add, opts...); err != nil {
			return usageError(err)
		}
		if cfg.Events.Enabled { // the events no SKU's audit sees
			o, err := audit.Outbox(ctx, sqlDB, opts...)
			if err != nil {
				return usageError(err)
			}
			out.outbox = &o
		}
	}
	if err := out.end(); err != nil {
		return usageError(err)
	}
	var failed []string
	if o := out.outbox; o != nil && !o.OK() {
		failed = append(failed, fmt.Sprintf("the order events' outbox fails %s: %s", o.Failures[0].Invariant, o.Failures[0].Detail))
	}
	if out.failed > 0 {
		more := ""
		if out.failed > len(out.named) {
			more = fmt.Sprintf(" and %d more", out.failed-len(out.named))
		}
		failed = append(failed, fmt.Sprintf("%d of %d SKUs fail an invariant: %s%s", out.failed, out.audited, strings.Join(out.named, "; "), more))
	}
	if len(failed) == 0 {
		return nil
	}
	return &exitError{code: 1, err: fmt.Errorf("audit: %s", strings.Join(failed, "; "))}
}

// auditable refuses a database with nothing to audit: no seckill schema,
// or, for a whole audit, no SKU. Either is a wrong mysql.dsn far more
// often than a sale, and an audit of nothing must not pass for a clean one.
func auditable(ctx context.Context, db *sql.DB, sku int64) error {
	var n int64
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM skus").Scan(&n); err != nil {
		var myErr *mysql.MySQLError
		if errors.As(err, &myErr) && myErr.Number == mysqlerr.NoSuchTable {
			return fmt.Errorf("audit: the database has no seckill schema (is mysql.dsn the sale's? seckill migrate up creates it): %w", err)
		}
		return fmt.Errorf("audit: %w", err)
	}
	if n == 0 && sku == 0 {
		return errors.New("audit: the database has no SKU to audit (is mysql.dsn the sale's?)")
	}
	return nil
}

// auditWriter streams the reports: a row (or a JSON element) per SKU as it
// is audited, so the output, like the audit, holds one SKU at a time.
type auditWriter struct {
	w       io.Writer
	json    bool
	audited int
	failed  int
	named   []string            // the first maxNamed failed SKUs with their invariants
	outbox  *audit.OutboxReport // the whole audit's, with events on
}

func newAuditWriter(w io.Writer, asJSON bool) *auditWriter {
	return &auditWriter{w: w, json: asJSON}
}

// auditRow's columns: the skus row (units and its version), the orders
// by status (counts of orders), the units those orders hold, the buyers
// and their held units, the idempotency keys.
const auditRow = "%-10v %10v %10v %10v %10v %14v %11v %16v %14v %14v %13v %10v %9v %10v %9v  %s\n"

func (a *auditWriter) begin() error {
	if a.json {
		_, err := io.WriteString(a.w, `{"skus":[`)
		return err
	}
	_, err := fmt.Fprintf(a.w, auditRow, "SKU", "TOTAL", "STOCK", "SOLD", "VERSION",
		"PENDING_ORDERS", "PAID_ORDERS", "CANCELLED_ORDERS", "EXPIRED_ORDERS", "WAITING_ORDERS", "LAPSED_ORDERS", "LIVE_UNITS", "BUYERS", "HELD_UNITS", "KEYED", "RESULT")
	return err
}

func (a *auditWriter) add(r audit.Report) error {
	a.audited++
	if !r.OK() {
		a.failed++
		if len(a.named) < maxNamed {
			a.named = append(a.named, fmt.Sprintf("sku %d (%s)", r.SKU, failedNames(r, ", ")))
		}
	}
	if a.json {
		b, err := json.Marshal(r)
		if err != nil {
			return err
		}
		sep := "\n"
		if a.audited > 1 {
			sep = ",\n"
		}
		_, err = fmt.Fprintf(a.w, "%s%s", sep, b)
		return err
	}
	result := "OK"
	if !r.OK() {
		result = "FAIL " + failedNames(r, ",")
	}
	if _, err := fmt.Fprintf(a.w, auditRow, r.SKU, r.TotalStock, r.Stock, r.Sold, r.Version,
		r.Pending.Orders, r.Paid.Orders, r.Cancelled.Orders, r.Expired.Orders, r.Waiting.Orders, r.Lapsed.Orders, r.LiveUnits(), r.Buyers, r.HeldUnits, r.Keyed, result); err != nil {
		return err
	}
	for _, f := range r.Failures {
		if _, err := fmt.Fprintf(a.w, "  sku %d %s: %s\n", r.SKU, f.Invariant, f.Detail); err != nil {
			return err
		}
	}
	return nil
}

func failedNames(r audit.Report, sep string) string {
	var b strings.Builder
	for i, inv := range r.Failed() {
		if i > 0 {
			b.WriteString(sep)
		}
		b.WriteString(string(inv))
	}
	return b.String()
}

func (a *auditWriter) end() error {
	ok := a.failed == 0 && (a.outbox == nil || a.outbox.OK())
	if a.json {
		outbox := ""
		if a.outbox != nil {
			b, err := json.Marshal(a.outbox)
			if err != nil {
				return err
			}
			outbox = `,"outbox":` + string(b)
		}
		_, err := fmt.Fprintf(a.w, "\n],\"audited\":%d,\"failed\":%d%s,\"ok\":%t}\n", a.audited, a.failed, outbox, ok)
		return err
	}
	if o := a.outbox; o != nil {
		result := "OK"
		if !o.OK() {
			result = "FAIL " + string(o.Failures[0].Invariant) + ": " + o.Failures[0].Detail
		}
		if _, err := fmt.Fprintf(a.w, "order events' outbox: %d rows, %d events: %s\n", o.Rows, o.Events, result); err != nil {
			return err
		}
	}
	_, err := fmt.Fprintf(a.w, "audited %d SKUs: %d OK, %d failed\n", a.audited, a.audited-a.failed, a.failed)
	return err
}

// replicaWait bounds the wait for the replica to apply the primary's
// position before the books are compared.
const replicaWait = 10 * time.Second

// compareReplica compares the books of the replica at dsn with the
// primary's and names the SKUs that differ (exit 1), never the DSN.
func compareReplica(ctx context.Context, primary *sql.DB, dsn string, asJSON bool, stdout io.Writer) error {
	rdb, _, err := database.OpenReplica(dsn, replicaWait)
	if err != nil {
		return usageError(fmt.Errorf("audit: -replica: %w", err))
	}
	defer rdb.Close()
	diffs, cu, err := audit.CompareReplica(ctx, primary, rdb, replicaWait.Seconds())
	if err != nil {
		return usageError(err)
	}
	if asJSON {
		b, err := json.Marshal(map[string]any{"differences": diffs, "replica": cu, "ok": len(diffs) == 0})
		if err != nil {
			return usageError(err)
		}
		if _, err := fmt.Fprintf(stdout, "%s\n", b); err != nil {
			return usageError(err)
		}
	} else {
		if !cu.Waited {
			fmt.Fprintf(stdout, "the replica had not applied the primary's position %s within %v: differences may be commits in flight\n", cu.PrimaryAt, replicaWait)
		}
		for _, d := range diffs {
			fmt.Fprintf(stdout, "sku %d differs: primary %s, replica %s\n", d.SKU, booksText(d.Primary), booksText(d.Replica))
		}
		fmt.Fprintf(stdout, "compared with the replica: %d SKUs differ\n", len(diffs))
	}
	if len(diffs) == 0 {
		return nil
	}
	names := make([]string, 0, min(len(diffs), maxNamed))
	for _, d := range diffs[:min(len(diffs), maxNamed)] {
		names = append(names, fmt.Sprintf("sku %d", d.SKU))
	}
	return &exitError{code: 1, err: fmt.Errorf("audit: %d SKUs differ on the replica: %s", len(diffs), strings.Join(names, ", "))}
}

func booksText(b *audit.Books) string {
	if b == nil {
		return "absent"
	}
	return fmt.Sprintf("stock %d sold %d version %d, %d orders of %d units, last order %d, digest %08x", b.Stock, b.Sold, b.Version, b.Orders, b.Units, b.LastOrder, b.Digest)
}
