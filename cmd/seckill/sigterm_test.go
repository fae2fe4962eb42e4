package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/auth"
	"github.com/seckill/seckill/internal/testenv"
)

// buildSeckill builds this command into a temporary directory and
// returns the binary's path.
func buildSeckill(t *testing.T) string {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go tool to build the binary: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "seckill")
	// A bound, not a measurement: on a cold build cache beside the rest of
	// the suite (-race) the build alone has taken over 5 minutes.
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, gobin, "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// passwordUser creates a MySQL user with a password, allowed on the
// database of dsn only, and returns dsn as that user and the password.
// The user is dropped when the test ends. Users are created only on a
// server the test run started itself (scripts/with-test-servers.sh); on
// any other, dsn is used as it is, with whatever password it has.
func passwordUser(t *testing.T, dsn string) (string, string) {
	t.Helper()
	mc, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	if os.Getenv("SECKILL_TEST_MYSQL_THROWAWAY") == "" {
		return dsn, mc.Passwd
	}
	admin, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close() })
	user, password := testenv.Name("sk_"), testenv.Name("pw-secret-")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := admin.ExecContext(ctx, fmt.Sprintf("CREATE USER '%s'@'%%' IDENTIFIED BY '%s'", user, password)); err != nil {
		t.Fatalf("create user: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := admin.ExecContext(ctx, fmt.Sprintf("DROP USER '%s'@'%%'", user)); err != nil {
			t.Errorf("drop user %s: %v", user, err)
		}
	})
	if _, err := admin.ExecContext(ctx, fmt.Sprintf("GRANT ALL ON `%s`.* TO '%s'@'%%'", mc.DBName, user)); err != nil {
		t.Fatalf("grant: %v", err)
	}
	mc.User, mc.Passwd = user, password
	return mc.FormatDSN(), password
}

// child is `seckill serve` running as a separate process.
type child struct {
	cmd            *exec.Cmd
	stdout, stderr *syncBuffer
	exited         chan struct{} // closed when Wait returned
	err            error         // Wait's result, once exited is closed
}

func startChild(t *testing.T, bin string, vars map[string]string) *child {
	t.Helper()
	c := &child{stdout: newSyncBuffer(), stderr: newSyncBuffer(), exited: make(chan struct{})}
	c.cmd = exec.Command(bin, "serve")
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SECKILL_") { // only what this test sets
			c.cmd.Env = append(c.cmd.Env, kv)
		}
	}
	for k, v := range vars {
		c.cmd.Env = append(c.cmd.Env, k+"="+v)
	}
	c.cmd.Stdout, c.cmd.Stderr = c.stdout, c.stderr
	if err := c.cmd.Start(); err != nil {
		t.Fatalf("start seckill serve: %v", err)
	}
	go func() {
		c.err = c.cmd.Wait()
		close(c.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-c.exited:
		default:
			_ = c.cmd.Process.Kill()
			<-c.exited
		}
	})
	return c
}

// waitReady polls /readyz until it answers 200 "ok", the child exits or
// the deadline passes.
func (c *child) waitReady(t *testing.T, base string) {
	t.Helper()
	hc := &http.Client{Timeout: time.Second}
	deadline := time.After(30 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if resp, err := hc.Get(base + "/readyz"); err == nil {
			var r struct{ Status string }
			derr := json.NewDecoder(resp.Body).Decode(&r)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && derr == nil && r.Status == "ok" {
				return
			}
		}
		select {
		case <-c.exited:
			t.Fatalf("seckill serve exited before it was ready: %v\nstderr:\n%s", c.err, c.stderr)
		case <-deadline:
			t.Fatalf("seckill serve not ready within 30s\nstderr:\n%s", c.stderr)
		case <-tick.C:
		}
	}
}

// answer is what one buyer got.
type answer struct {
	key    string
	status int    // 0 on a connection error
	code   string // the error code of an error body
	err    error
}

// TestSIGTERMDuringASale sends SIGTERM to a real `seckill serve` while a
// sale is in full swing: everything it accepted is answered from the
// contract, it exits 0 within the shutdown timeout, leaves no lock behind
// and nothing it refused or dropped was charged.
func TestSIGTERMDuringASale(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs a sale")
	}
	t.Parallel()
	const (
		stock           = 300
		buyers          = 800
		shutdownTimeout = 20 * time.Second
		batchMax        = 32 // several batches: most buyers wait in the queue
	)
	bin := buildSeckill(t)
	rootDSN := testenv.Database(t)
	dsn, password := passwordUser(t, rootDSN)
	rds := testenv.StartRedis(t)
	adminToken := testenv.Name("sigterm-admin-token-")
	prefix := testenv.Name("sigterm:") + ":"
	addr := "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
	base := "http://" + addr
	shopperSecret := testenv.Name("sigterm-shopper-secret-0123456789abcdef-")
	orderIDKey := "0f0e0d0c0b0a09080706050403020100"

	c := startChild(t, bin, map[string]string{
		"SECKILL_AUTH_JWT_SECRET":       shopperSecret, // auth.shopper jwt, the default
		"SECKILL_AUTH_ORDER_ID_KEY":     orderIDKey,
		"SECKILL_MYSQL_DSN":             dsn,
		"SECKILL_REDIS_ADDRS":           rds.Addr,
		"SECKILL_ADMIN_TOKEN":           adminToken,
		"SECKILL_HTTP_ADDR":             addr,
		"SECKILL_LOCK_PREFIX":           prefix,
		"SECKILL_HTTP_SHUTDOWN_TIMEOUT": shutdownTimeout.String(),
		"SECKILL_ORDER_BATCH_MAX":       strconv.Itoa(batchMax),
		"SECKILL_LOG_LEVEL":             "debug", // the most it ever logs
	})
	c.waitReady(t, base)

	// The SKU, through the admin API.
	req, err := http.NewRequest(http.MethodPost, base+"/admin/v1/skus",
		strings.NewReader(fmt.Sprintf(`{"name":"sigterm","stock":%d,"per_user_limit":1}`, stock)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("create sku: %v", err)
	}
	var sku struct{ ID int64 }
	derr := json.NewDecoder(resp.Body).Decode(&sku)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated || derr != nil || sku.ID < 1 {
		t.Fatalf("create sku = %d (%v) id %d; want 201 with an id", resp.StatusCode, derr, sku.ID)
	}

	// The sale: every buyer has its own connection, opened beforehand so
	// that all requests reach the server together and queue behind the
	// first batch; they are released at once, and SIGTERM goes out as
	// soon as the first order is answered 201.
	clients := make([]*http.Client, buyers)
	var warm sync.WaitGroup
	for i := range clients {
		clients[i] = &http.Client{
			Timeout:   shutdownTimeout + 20*time.Second, // longer than any answer may take
			Transport: &http.Transport{MaxIdleConnsPerHost: 1},
		}
		t.Cleanup(clients[i].CloseIdleConnections)
		warm.Go(func() {
			resp, err := clients[i].Get(base + "/healthz")
			if err != nil {
				t.Errorf("buyer %d: open a connection: %v", i, err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		})
	}
	warm.Wait()
	if t.Failed() {
		t.FailNow()
	}
	var (
		answers    = make([]answer, buyers)
		start      = make(chan struct{})
		wg         sync.WaitGroup
		signalOnce sync.Once
		signalled  = make(chan struct{})
		signalErr  error
		afterTERM  atomic.Int64
	)
	sigterm := func() {
		signalOnce.Do(func() {
			signalErr = c.cmd.Process.Signal(syscall.SIGTERM)
			close(signalled)
		})
	}
	tokens := make([]string, buyers)
	for i := range tokens {
		tokens[i], err = auth.Mint([]byte(shopperSecret), auth.Claims{Subject: fmt.Sprintf("sigterm-user-%d", i), Audience: "seckill", TTL: time.Hour}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
	}
	// A refused token is logged (at debug) by why, never by its text.
	forged := tokens[0][:len(tokens[0])-4] + "AAAA"
	if status := postOrder(t, base, forged, fmt.Sprintf(`{"sku_id":%d,"quantity":1}`, sku.ID)); status != http.StatusUnauthorized {
		t.Fatalf("an order with a forged token = %d; want 401", status)
	}
	for i := range buyers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a := &answers[i]
			a.key = fmt.Sprintf("sigterm-key-%d", i)
			body := fmt.Sprintf(`{"sku_id":%d,"user_id":"sigterm-user-%d","quantity":1}`, sku.ID, i)
			req, err := http.NewRequest(http.MethodPost, base+"/api/v1/orders", strings.NewReader(body))
			if err != nil {
				a.err = err
				return
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Idempotency-Key", a.key)
			req.Header.Set("Authorization", "Bearer "+tokens[i])
			<-start
			resp, err := clients[i].Do(req)
			if err != nil {
				a.err = err
				return
			}
			defer resp.Body.Close()
			a.status = resp.StatusCode
			raw, err := io.ReadAll(resp.Body)
			if err != nil {
				a.err = fmt.Errorf("status %d, body: %w", resp.StatusCode, err)
				return
			}
			var e struct{ Error struct{ Code string } }
			if json.Unmarshal(raw, &e) == nil {
				a.code = e.Error.Code
			}
			select {
			case <-signalled:
				afterTERM.Add(1)
			default:
			}
			if a.status == http.StatusCreated {
				sigterm()
			}
		}()
	}
	close(start)
	wg.Wait()

	select {
	case <-signalled:
	default:
		sigterm() // so that the exit is still checked
		t.Error("no buyer was answered 201: SIGTERM was sent after the sale")
	}
	if signalErr != nil {
		t.Fatalf("SIGTERM: %v", signalErr)
	}
	select {
	case <-c.exited:
	case <-time.After(shutdownTimeout + 10*time.Second):
		_ = c.cmd.Process.Kill()
		<-c.exited
		t.Fatalf("seckill serve did not exit within %v of SIGTERM; killed\nstderr:\n%s", shutdownTimeout+10*time.Second, c.stderr)
	}
	if c.err != nil {
		t.Errorf("seckill serve after SIGTERM: %v; want exit status 0\nstderr:\n%s", c.err, c.stderr)
	}

	// Every buyer got an answer from the contract or could not connect.
	statuses := map[string]int{}
	var created int
	status := map[string]int{} // key → status (0: connection error)
	for _, a := range answers {
		status[a.key] = a.status
		switch {
		case a.err != nil:
			var ne net.Error
			if errors.As(a.err, &ne) && ne.Timeout() {
				t.Errorf("buyer %s hung: %v", a.key, a.err)
			}
			if a.status != 0 {
				t.Errorf("buyer %s: status %d but the body was cut: %v", a.key, a.status, a.err)
			}
			statuses["connection error"]++
		case a.status == http.StatusCreated:
			created++
			statuses["201"]++
		case a.status == http.StatusConflict && a.code == "sold_out",
			a.status == http.StatusTooManyRequests && a.code == "busy",
			a.status == http.StatusServiceUnavailable && a.code == "unavailable":
			statuses[fmt.Sprintf("%d %s", a.status, a.code)]++
		default:
			t.Errorf("buyer %s: %d %q, outside the contract (201, 409 sold_out, 429 busy, 503 unavailable)", a.key, a.status, a.code)
		}
	}
	t.Logf("answers: %v; %d answered after SIGTERM", statuses, afterTERM.Load())
	connErrs := map[string]int{}
	for _, a := range answers {
		if a.err != nil {
			msg := a.err.Error()
			connErrs[msg[strings.LastIndex(msg, ":")+1:]]++
		}
	}
	t.Logf("connection errors: %v", connErrs)
	// The drain was exercised: buyers beyond the batch in flight at
	// SIGTERM were queued and answered after it.
	if n := afterTERM.Load(); n <= batchMax {
		t.Errorf("%d buyers answered after SIGTERM; want more than a batch (%d): nothing was queued, the drain went untested", n, batchMax)
	}

	// The database: one order per 201, none for anyone else.
	db, err := sql.Open("mysql", rootDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rows, err := db.QueryContext(ctx, "SELECT COALESCE(idempotency_key, ''), quantity FROM orders WHERE sku_id = ?", sku.ID)
	if err != nil {
		t.Fatal(err)
	}
	perKey := map[string]int{}
	orders := 0
	for rows.Next() {
		var key string
		var qty int64
		if err := rows.Scan(&key, &qty); err != nil {
			t.Fatal(err)
		}
		perKey[key]++
		orders++
		if qty != 1 {
			t.Errorf("order %q has quantity %d; want 1", key, qty)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	rows.Close()
	for key, n := range perKey {
		st, ok := status[key]
		switch {
		case !ok:
			t.Errorf("order with key %q: no buyer sent it", key)
		case st != http.StatusCreated:
			// A connection error with an order would be an accepted
			// request left unanswered by the shutdown.
			t.Errorf("buyer %s was answered %d (0: connection error) but holds %d order(s)", key, st, n)
		case n != 1:
			t.Errorf("buyer %s holds %d orders; want 1", key, n)
		}
	}
	for key, st := range status {
		if st == http.StatusCreated && perKey[key] != 1 {
			t.Errorf("buyer %s was answered 201 but holds %d orders; want 1", key, perKey[key])
		}
	}
	var total, left, sold int64
	if err := db.QueryRowContext(ctx, "SELECT total_stock, stock, sold FROM skus WHERE id = ?", sku.ID).Scan(&total, &left, &sold); err != nil {
		t.Fatal(err)
	}
	if sold != int64(orders) || left+sold != total || total != stock || left < 0 || sold != int64(created) {
		t.Errorf("sku after the sale: total %d, stock %d, sold %d, %d orders, %d answered 201; want sold == orders == 201s, stock+sold == total == %d, stock >= 0",
			total, left, sold, orders, created, stock)
	}

	// No lock left behind in Redis.
	rc := redis.NewClient(&redis.Options{Addr: rds.Addr})
	defer rc.Close()
	lockKey := prefix + "{sku:" + strconv.FormatInt(sku.ID, 10) + "}"
	if n, err := rc.Exists(ctx, lockKey).Result(); err != nil || n != 0 {
		t.Errorf("EXISTS %s after exit = %d, %v; want 0 (the lock released)", lockKey, n, err)
	}

	// The logs hold no secret.
	out, errOut := c.stdout.String(), c.stderr.String()
	secrets := map[string]string{
		"admin token":    adminToken,
		"shopper secret": shopperSecret, "order id key": orderIDKey, "a forged token": forged,
	}
	if password != "" {
		secrets["mysql password"] = password
	}
	for i, tok := range tokens {
		secrets[fmt.Sprintf("buyer %d's token", i)] = tok
		secrets[fmt.Sprintf("buyer %d's token signature", i)] = tok[strings.LastIndexByte(tok, '.')+1:]
	}
	for name, secret := range secrets {
		if strings.Contains(out, secret) || strings.Contains(errOut, secret) {
			t.Errorf("the %s appears in the process output", name)
		}
	}
	if !strings.Contains(errOut, "shutting down") {
		t.Errorf("stderr does not log the shutdown:\n%s", errOut)
	}
	if t.Failed() {
		t.Logf("stderr:\n%s", errOut)
	}
}

// postOrder places one order with a bearer token and returns the status.
func postOrder(t *testing.T, base, token, body string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+"/api/v1/orders", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}
