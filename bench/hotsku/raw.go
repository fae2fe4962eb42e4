package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/seckill/seckill/service"
)

// rawFence is the raw loop's lock fence, of a Redis lease's magnitude.
const rawFence = 1795883334326266

// rawLoop issues the statements of one engine batch of batch orders back
// to back on one connection, for o.duration after o.warmup: the round
// trips the engine's lock holder sends when it knows the row
// (repository/mysql_commit.go commitKnown, mysql_writes.go; in a round,
// under the lock): START TRANSACTION, the row-lock wait, the conditional
// UPDATE of the SKU, the orders' INSERT and the holdings' upsert in one,
// then COMMIT. Nothing else: no lock, no queue, no answers.
//
// With clustered, a batch's users are instead side by side in the
// tables' user indexes ("r<tx>-<i>"): what the same statements cost when
// a batch's rows share index pages, which no sale's buyers do.
func rawLoop(ctx context.Context, o options, srv servers, batch int, clustered bool) (row, error) {
	sku, err := createSKU(ctx, srv)
	if err != nil {
		return row{}, err
	}
	sqlDB, err := srv.admin.DB()
	if err != nil {
		return row{}, err
	}
	conn, err := sqlDB.Conn(ctx)
	if err != nil {
		return row{}, err
	}
	defer conn.Close()
	var (
		sold atomic.Int64
		stop = make(chan struct{})
		errc = make(chan error, 1)
	)
	go func() {
		var version int64
		for tx := int64(0); tx < 1<<30; tx++ { // bounded; stop ends it long before
			select {
			case <-stop:
				errc <- nil
				return
			default:
			}
			q, args := rawBatch(sku, version, tx, batch, o.buyers, clustered)
			res, err := conn.ExecContext(ctx, q, args...)
			if err == nil {
				_, err = conn.ExecContext(ctx, "SET SESSION innodb_lock_wait_timeout = DEFAULT; COMMIT")
			}
			if err != nil {
				errc <- err
				return
			}
			if n, err := res.RowsAffected(); err != nil || n != int64(batch) {
				errc <- fmt.Errorf("the holdings' upsert affected %d rows (%v); want %d", n, err, batch)
				return
			}
			version++
			sold.Add(int64(batch))
		}
		errc <- errors.New("raw loop: bound reached")
	}()
	var none atomic.Int64
	name := "raw @" + strconv.Itoa(batch)
	if clustered {
		name += " clustered"
	}
	rw, err := measure(ctx, o, srv, name, sold.Load, &none)
	close(stop)
	if err = errors.Join(err, <-errc); err != nil {
		return rw, err
	}
	return rw, check(ctx, srv, sku, sold.Load())
}

// rawBatch is the statement that begins transaction tx and writes its
// batch orders, at the row's version, as mysql_writes.go shapes it. Its
// users are the engine rows' (sell.go): the n-th order of the loop is
// buyer n mod buyers's buy n / buyers, so a batch's holdings and orders
// land across the tables' user indexes as an engine batch's do, one
// buyer each, not side by side (unless clustered: see rawLoop).
func rawBatch(sku, version, tx int64, batch, buyers int, clustered bool) (string, []any) {
	now := time.Now().UTC().Truncate(time.Microsecond)
	var q strings.Builder
	q.WriteString("START TRANSACTION; SET SESSION innodb_lock_wait_timeout = 1; ")
	q.WriteString("UPDATE skus SET stock = stock - CASE id WHEN ? THEN ? END, sold = sold + CASE id WHEN ? THEN ? END, " +
		"version = version + 1, updated_at = ?, fence = CASE id WHEN ? THEN ? ELSE fence END " +
		"WHERE (id = ? AND stock >= ? AND version = ? AND (fence <= ? OR fence > ?))")
	args := []any{sku, batch, sku, batch, now, sku, rawFence, sku, batch, version, rawFence, service.FenceCeiling(rawFence)}
	q.WriteString("; INSERT INTO orders (sku_id, user_id, quantity, idempotency_key, created_at, status, expires_at, arrival, joined_version) VALUES ")
	users := make([]string, batch)
	for i := range users {
		n := tx*int64(batch) + int64(i)
		users[i] = "b" + strconv.FormatInt(n%int64(buyers), 10) + "-" + strconv.FormatInt(n/int64(buyers), 10)
		if clustered {
			users[i] = "r" + strconv.FormatInt(tx, 10) + "-" + strconv.Itoa(i)
		}
		if i > 0 {
			q.WriteString(", ")
		}
		q.WriteString("(?, ?, ?, ?, ?, ?, ?, ?, ?)")
		args = append(args, sku, users[i], 1, nil, now, string(service.OrderPending), now.Add(15*time.Minute), now.UnixMicro(), nil)
	}
	q.WriteString("; INSERT INTO user_purchases (sku_id, user_id, quantity, per_user_limit, waiting) VALUES ")
	for i, u := range users {
		if i > 0 {
			q.WriteString(", ")
		}
		q.WriteString("(?, ?, ?, ?, ?)")
		args = append(args, sku, u, 1, 1, 0)
	}
	q.WriteString(" ON DUPLICATE KEY UPDATE quantity = quantity + VALUES(quantity), waiting = waiting + VALUES(waiting)")
	return q.String(), args
}
