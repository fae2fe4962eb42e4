package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/seckill/seckill/internal/auth"
	"github.com/seckill/seckill/internal/config"
	"github.com/seckill/seckill/internal/testenv"
)

const token = "cmd-test-admin-token-0123456789"

// env returns a getenv over vars.
func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

// emptyDatabase creates an empty database (no tables) and returns its DSN
// and a pool on it; the database is dropped when the test ends.
func emptyDatabase(t *testing.T) (string, *sql.DB) {
	t.Helper()
	mc, err := mysql.ParseDSN(testenv.MySQLDSN())
	if err != nil {
		t.Fatal(err)
	}
	admin, err := sql.Open("mysql", mc.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close() })
	name := testenv.Name("seckill_cmd_")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("create database: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := admin.ExecContext(ctx, "DROP DATABASE "+name); err != nil {
			t.Errorf("drop database %s: %v", name, err)
		}
	})
	mc.DBName = name
	db, err := sql.Open("mysql", mc.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return mc.FormatDSN(), db
}

func tables(t *testing.T, db *sql.DB) []string {
	t.Helper()
	rows, err := db.Query("SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE() ORDER BY table_name")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		out = append(out, n)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestMigrate runs `seckill migrate up`, `down`, `up` on an empty database.
func TestMigrate(t *testing.T) {
	t.Parallel()
	dsn, db := emptyDatabase(t)
	getenv := env(map[string]string{
		"SECKILL_MYSQL_DSN":   dsn,
		"SECKILL_REDIS_ADDRS": testenv.RedisAddr(),
		"SECKILL_ADMIN_TOKEN": token,
		"SECKILL_LOG_LEVEL":   "warn",
	})
	schema := []string{"orders", "skus", "user_purchases", "leader_fences"}
	hasSchema := func(got []string) bool {
		for _, n := range schema {
			if !slices.Contains(got, n) {
				return false
			}
		}
		return true
	}
	hasNone := func(got []string) bool {
		for _, n := range schema {
			if slices.Contains(got, n) {
				return false
			}
		}
		return true
	}
	hasSchema00002 := func(got []string) bool { // before 00003: no leader_fences
		return slices.Contains(got, "orders") && !slices.Contains(got, "leader_fences")
	}
	if got := tables(t, db); len(got) != 0 {
		t.Fatalf("fresh database holds %v; want no tables", got)
	}
	steps := []struct {
		cmd  string
		want func([]string) bool
		desc string
		out  *regexp.Regexp // what it tells the operator on stdout
	}{
		{"up", hasSchema, "the schema", regexp.MustCompile(`(?m)^applied 00001_init\.sql \(`)},
		{"up", hasSchema, "the schema (a second up is a no-op)", regexp.MustCompile(`^nothing to apply: the database is at version \d+, the latest\n$`)},
		{"status", hasSchema, "the schema", regexp.MustCompile(`^VERSION +MIGRATION +STATE +APPLIED AT \(UTC\)\n1 +00001_init\.sql +applied +\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\n2 +00002_orders_by_user\.sql +applied `)},
		{"down", hasSchema, "the schema before order events by the run (00007 undone)", regexp.MustCompile(`^rolled back 00007_order_event_runs\.sql \(`)},
		{"down", hasSchema, "the schema before order events (00006 undone)", regexp.MustCompile(`^rolled back 00006_order_events\.sql \(`)},
		{"down", hasSchema, "the schema before the waitlist (00005 undone)", regexp.MustCompile(`^rolled back 00005_waitlist\.sql \(`)},
		{"down", hasSchema, "the schema before ids were compared by bytes (00004 undone)", regexp.MustCompile(`^rolled back 00004_ids_by_bytes\.sql \(`)},
		{"down", hasSchema00002, "the schema before the lifecycle (down undoes only the latest, 00003's leader_fences and order status)", regexp.MustCompile(`^rolled back 00003_order_lifecycle\.sql \(`)},
		{"down", hasSchema00002, "the schema (00002's orders_user_id index undone)", regexp.MustCompile(`^rolled back 00002_orders_by_user\.sql \(`)},
		{"down", hasNone, "none of the schema", regexp.MustCompile(`^rolled back 00001_init\.sql \(`)},
		{"up", hasSchema, "the schema again", regexp.MustCompile(`(?m)^applied 00001_init\.sql \(`)},
	}
	for i, st := range steps {
		var stdout, stderr bytes.Buffer
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := run(ctx, []string{"migrate", st.cmd}, getenv, &stdout, &stderr)
		cancel()
		if err != nil {
			t.Fatalf("step %d: seckill migrate %s: %v\n%s", i, st.cmd, err, stderr.String())
		}
		if got := tables(t, db); !st.want(got) {
			t.Fatalf("step %d: after migrate %s the tables are %v; want %s %v", i, st.cmd, got, st.desc, schema)
		}
		if !st.out.MatchString(stdout.String()) {
			t.Errorf("step %d: seckill migrate %s printed %q; want it to match %s", i, st.cmd, stdout.String(), st.out)
		}
	}
	// The schema that came back works: its constraints are there.
	if _, err := db.Exec("INSERT INTO skus (name, total_stock, stock, created_at, updated_at) VALUES ('x', 1, -1, NOW(), NOW())"); err == nil {
		t.Error("the re-created schema accepts negative stock")
	}

	var stderr bytes.Buffer
	if err := run(context.Background(), []string{"migrate", "sideways"}, getenv, io.Discard, &stderr); err == nil || !strings.Contains(err.Error(), "sideways") {
		t.Errorf("migrate sideways = %v; want an error naming the command", err)
	}
}

// syncBuffer is an io.Writer that tells waiters when it was written.
type syncBuffer struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	written chan struct{} // closed and replaced at every Write
}

func newSyncBuffer() *syncBuffer { return &syncBuffer{written: make(chan struct{})} }

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	close(b.written)
	b.written = make(chan struct{})
	return b.buf.Write(p)
}

// snapshot returns the text so far and a channel closed by the next Write.
func (b *syncBuffer) snapshot() (string, <-chan struct{}) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String(), b.written
}

func (b *syncBuffer) String() string { s, _ := b.snapshot(); return s }

// curl is a request as a printed curl line describes it.
type curl struct {
	method, url, body string
	header            http.Header
}

// parseCurl understands the curl lines the quick start prints: words,
// single-quoted strings, -s, -X METHOD, -H 'Name: value' and -d 'body'.
func parseCurl(line string) (curl, error) {
	var words []string
	var cur strings.Builder
	inWord, quoted := false, false
	for _, r := range strings.TrimSpace(line) {
		switch {
		case quoted && r == '\'':
			quoted = false
		case quoted:
			cur.WriteRune(r)
		case r == '\'':
			quoted, inWord = true, true
		case r == ' ' || r == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if quoted {
		return curl{}, errors.New("unterminated quote")
	}
	if inWord {
		words = append(words, cur.String())
	}
	if len(words) == 0 || words[0] != "curl" {
		return curl{}, fmt.Errorf("not a curl line: %q", line)
	}
	c := curl{header: http.Header{}}
	for i := 1; i < len(words); i++ {
		w := words[i]
		arg := func() (string, error) {
			if i+1 >= len(words) {
				return "", fmt.Errorf("%s without its argument", w)
			}
			i++
			return words[i], nil
		}
		var err error
		var v string
		switch w {
		case "-s":
		case "-X":
			c.method, err = arg()
		case "-H":
			if v, err = arg(); err == nil {
				name, value, ok := strings.Cut(v, ":")
				if !ok {
					return curl{}, fmt.Errorf("header %q", v)
				}
				c.header.Add(strings.TrimSpace(name), strings.TrimSpace(value))
			}
		case "-d":
			c.body, err = arg()
		default:
			if strings.HasPrefix(w, "-") || c.url != "" {
				return curl{}, fmt.Errorf("unexpected %q", w)
			}
			c.url = w
		}
		if err != nil {
			return curl{}, err
		}
	}
	if c.method == "" {
		c.method = http.MethodGet
		if c.body != "" {
			c.method = http.MethodPost // what curl does with -d
		}
	}
	if c.url == "" {
		return curl{}, errors.New("no URL")
	}
	return c, nil
}

func (c curl) do(t *testing.T) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(c.method, c.url, strings.NewReader(c.body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = c.header.Clone()
	if c.body != "" && req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded") // curl's default for -d
	}
	client := &http.Client{Timeout: 30 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", c.method, c.url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, body
}

// TestQuickStart runs the service with nothing configured, as `go run
// ./cmd/seckill` does, and follows its printed instructions to the letter.
func TestQuickStart(t *testing.T) {
	t.Parallel()
	port := testenv.FreePort(t)
	getenv := env(map[string]string{"SECKILL_HTTP_ADDR": "127.0.0.1:" + strconv.Itoa(port)})
	stdout, stderr := newSyncBuffer(), newSyncBuffer()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- run(ctx, nil, getenv, stdout, stderr) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("run after cancel = %v; want nil (a clean shutdown)\nstderr:\n%s", err, stderr)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("run did not return within 30s of cancel")
		}
	}
	t.Cleanup(stop)

	// Wait, bounded, until the admin curl line (printed last) is out.
	deadline := time.After(30 * time.Second)
	var out string
	for {
		var written <-chan struct{}
		out, written = stdout.snapshot()
		if strings.Contains(out, "Authorization: Bearer") && strings.HasSuffix(out, "\n") {
			break
		}
		select {
		case <-written:
		case err := <-done:
			stopped = true
			t.Fatalf("run returned before printing the quick start: %v\nstdout:\n%s\nstderr:\n%s", err, out, stderr)
		case <-deadline:
			t.Fatalf("no quick start printed within 30s\nstdout:\n%s\nstderr:\n%s", out, stderr)
		}
	}

	var buyLines []string
	var adminLine, mintLine, payLine string
	for _, l := range strings.Split(out, "\n") {
		l = strings.TrimSpace(l)
		switch {
		case strings.HasPrefix(l, "curl ") && strings.Contains(l, "/api/v1/orders"):
			buyLines = append(buyLines, l)
		case strings.HasPrefix(l, "curl ") && strings.Contains(l, "/internal/v1/orders/$ORDER_ID/paid"):
			payLine = l
		case strings.HasPrefix(l, "curl ") && strings.Contains(l, "/admin/v1/skus/"):
			adminLine = l
		case strings.HasPrefix(l, "SECKILL_AUTH_JWT_SECRET="):
			mintLine = l
		}
	}
	// A buy line for each of three demo shoppers, how to mint more, and
	// how the payment system confirms a payment.
	if len(buyLines) != 3 || adminLine == "" || mintLine == "" || payLine == "" {
		t.Fatalf("quick start lacks the three buy lines, the admin curl line, the mint command or the payment line:\n%s", out)
	}
	buyLine := buyLines[0]

	buy, err := parseCurl(buyLine)
	if err != nil {
		t.Fatalf("parse %q: %v", buyLine, err)
	}
	wantPrefix := "http://127.0.0.1:" + strconv.Itoa(port) + "/"
	if buy.method != http.MethodPost || !strings.HasPrefix(buy.url, wantPrefix) {
		t.Errorf("buy line = %s %s; want POST %s...", buy.method, buy.url, wantPrefix)
	}
	var req struct {
		SKUID    int64  `json:"sku_id"`
		UserID   string `json:"user_id"`
		Quantity int64  `json:"quantity"`
	}
	if err := json.Unmarshal([]byte(buy.body), &req); err != nil {
		t.Fatalf("buy body %q: %v", buy.body, err)
	}
	// The quick start runs auth.shopper jwt: the line carries a token.
	shopperAuth := buy.header.Get("Authorization")
	buy.header.Del("Authorization")
	if status, body := buy.do(t); status != http.StatusUnauthorized || !strings.Contains(string(body), `"unauthorized"`) {
		t.Errorf("the printed buy without its token = %d %s; want 401 unauthorized", status, body)
	}
	buy.header.Set("Authorization", shopperAuth)
	status, body := buy.do(t)
	if status != http.StatusCreated {
		t.Fatalf("the printed buy = %d %s; want 201", status, body)
	}
	var ord struct {
		OrderID   string    `json:"order_id"`
		SKUID     int64     `json:"sku_id"`
		UserID    string    `json:"user_id"`
		Quantity  int64     `json:"quantity"`
		CreatedAt time.Time `json:"created_at"`
	}
	if err := json.Unmarshal(body, &ord); err != nil {
		t.Fatalf("order %s: %v", body, err)
	}
	if ord.OrderID == "" || ord.SKUID != req.SKUID || ord.UserID != req.UserID || ord.Quantity != req.Quantity || ord.CreatedAt.IsZero() {
		t.Errorf("order = %+v; want the printed request %+v with an id", ord, req)
	}
	// The same line again is that user's second unit: over the demo's limit of 1.
	if status, body := buy.do(t); status != http.StatusConflict || !strings.Contains(string(body), `"limit_exceeded"`) {
		t.Errorf("the printed buy again = %d %s; want 409 limit_exceeded", status, body)
	}
	// The printed payment line, with the order's id, pays it.
	pay, err := parseCurl(strings.Replace(payLine, "$ORDER_ID", ord.OrderID, 1))
	if err != nil {
		t.Fatalf("parse %q: %v", payLine, err)
	}
	if status, body := pay.do(t); status != http.StatusOK || !strings.Contains(string(body), `"status":"paid"`) {
		t.Errorf("the printed payment line for order %s = %d %s; want 200, paid", ord.OrderID, status, body)
	}

	// The other demo shoppers each buy their unit.
	for _, l := range buyLines[1:] {
		c, err := parseCurl(l)
		if err != nil {
			t.Fatalf("parse %q: %v", l, err)
		}
		if status, body := c.do(t); status != http.StatusCreated {
			t.Errorf("%s = %d %s; want 201", l, status, body)
		}
	}
	// The printed mint command, run as printed, makes a token this
	// instance takes for a fourth shopper.
	words := strings.Fields(mintLine)
	vars := map[string]string{}
	for len(words) > 0 && strings.Contains(words[0], "=") {
		k, v, _ := strings.Cut(words[0], "=")
		vars[k], words = strings.Trim(v, "'"), words[1:]
	}
	if len(words) < 3 || strings.Join(words[:3], " ") != "go run ./cmd/seckill" {
		t.Fatalf("mint line %q is not `VARS go run ./cmd/seckill ...`", mintLine)
	}
	var minted bytes.Buffer
	if err := run(context.Background(), words[3:], env(vars), &minted, io.Discard); err != nil {
		t.Fatalf("the printed mint command: %v", err)
	}
	sub := words[len(words)-1]
	fourth := buy
	fourth.header = buy.header.Clone()
	fourth.header.Set("Authorization", "Bearer "+strings.TrimSpace(minted.String()))
	fourth.body = strings.Replace(buy.body, `"u-1"`, strconv.Quote(sub), 1)
	if status, body := fourth.do(t); status != http.StatusCreated {
		t.Errorf("a buy with the minted token for %s = %d %s; want 201", sub, status, body)
	}

	admin, err := parseCurl(adminLine)
	if err != nil {
		t.Fatalf("parse %q: %v", adminLine, err)
	}
	tok, _ := strings.CutPrefix(admin.header.Get("Authorization"), "Bearer ")
	if len(tok) < 16 || !strings.Contains(out, "admin token: "+tok) {
		t.Errorf("admin line token %q is not the printed admin token:\n%s", tok, out)
	}
	status, body = admin.do(t)
	if status != http.StatusOK {
		t.Fatalf("the printed admin call = %d %s; want 200", status, body)
	}
	var sku struct {
		ID    int64 `json:"id"`
		Stock int64 `json:"stock"`
		Sold  int64 `json:"sold"`
		Paid  int64 `json:"paid"`
	}
	if err := json.Unmarshal(body, &sku); err != nil {
		t.Fatalf("sku %s: %v", body, err)
	}
	if sku.ID != req.SKUID || sku.Sold != 4 || sku.Stock != 96 || sku.Paid != 1 {
		t.Errorf("admin view = %+v; want sku %d with sold 4, stock 96, paid 1 (demo of 100, four shoppers, one paid)", sku, req.SKUID)
	}
	// Without the token the admin call is refused.
	admin.header.Del("Authorization")
	if status, _ := admin.do(t); status != http.StatusUnauthorized {
		t.Errorf("the admin call without the token = %d; want 401", status)
	}

	stop()
	if _, err := http.Get(wantPrefix + "healthz"); err == nil {
		t.Error("the service still answers after run returned")
	}
}

// TestInvalidConfig: a bad setting fails start-up at once with a message
// naming its key, before anything listens or prints.
func TestInvalidConfig(t *testing.T) {
	t.Parallel()
	base := map[string]string{
		"SECKILL_MYSQL_DSN":   "root@tcp(127.0.0.1:1)/nowhere",
		"SECKILL_REDIS_ADDRS": "127.0.0.1:1",
		"SECKILL_ADMIN_TOKEN": token,
	}
	tests := []struct {
		name string
		vars map[string]string // merged over base; "" deletes
		args []string
		want string // the key the message must name
	}{
		{"http addr", map[string]string{"SECKILL_HTTP_ADDR": "nonsense"}, nil, "http.addr"},
		{"http addr without port", map[string]string{"SECKILL_HTTP_ADDR": "127.0.0.1"}, nil, "http.addr"},
		{"queue max not an integer", map[string]string{"SECKILL_ORDER_QUEUE_MAX": "many"}, nil, "SECKILL_ORDER_QUEUE_MAX"},
		{"queue max zero", map[string]string{"SECKILL_ORDER_QUEUE_MAX": "0"}, nil, "order.queue_max"},
		{"batch max too big", map[string]string{"SECKILL_ORDER_BATCH_MAX": "10001"}, nil, "order.batch_max"},
		{"lock ttl not a duration", map[string]string{"SECKILL_LOCK_TTL": "forever"}, nil, "SECKILL_LOCK_TTL"},
		{"request timeout negative", map[string]string{"SECKILL_ORDER_REQUEST_TIMEOUT": "-1s"}, nil, "order.request_timeout"},
		{"redis addr", map[string]string{"SECKILL_REDIS_ADDRS": "localhost"}, nil, "redis.addrs"},
		{"no redis with a dsn", map[string]string{"SECKILL_REDIS_ADDRS": ""}, nil, "redis.addrs"},
		{"no token with a dsn", map[string]string{"SECKILL_ADMIN_TOKEN": ""}, nil, "admin.token"},
		{"short token", map[string]string{"SECKILL_ADMIN_TOKEN": "short"}, nil, "admin.token"},
		{"log level", map[string]string{"SECKILL_LOG_LEVEL": "loud"}, nil, "log.level"},
		{"log format", map[string]string{"SECKILL_LOG_FORMAT": "xml"}, nil, "log.format"},
		{"bad setting in the quick start", map[string]string{"SECKILL_MYSQL_DSN": "", "SECKILL_REDIS_ADDRS": "", "SECKILL_LOG_LEVEL": "loud"}, nil, "log.level"},
		{"jwt without a key with a dsn", nil, nil, "auth.jwt.secret"},
		{"no order id key with a dsn", map[string]string{"SECKILL_AUTH_SHOPPER": "none"}, nil, "auth.order_id_key"},
		{"shopper mode", map[string]string{"SECKILL_AUTH_SHOPPER": "maybe"}, nil, "auth.shopper"},
		{"short shopper secret", map[string]string{"SECKILL_AUTH_JWT_SECRET": "short"}, nil, "auth.jwt.secret"},
		{"two key sources", map[string]string{"SECKILL_AUTH_JWT_SECRET": strings.Repeat("s", 32), "SECKILL_AUTH_JWT_JWKS": "http://127.0.0.1:1/jwks"}, nil, "auth.jwt.jwks"},
		{"HS256 with a public key", map[string]string{"SECKILL_AUTH_JWT_PUBLIC_KEY_FILE": "/idp.pem", "SECKILL_AUTH_JWT_ALGORITHMS": "HS256"}, nil, "auth.jwt.algorithms"},
		{"alg none", map[string]string{"SECKILL_AUTH_JWT_SECRET": strings.Repeat("s", 32), "SECKILL_AUTH_JWT_ALGORITHMS": "none"}, nil, "auth.jwt.algorithms"},
		{"order id key not hex", map[string]string{"SECKILL_AUTH_ORDER_ID_KEY": "not-a-key"}, nil, "auth.order_id_key"},
		{"short token in a rotation list", map[string]string{"SECKILL_ADMIN_TOKEN": token + ",short"}, nil, "admin.token"},
		{"config file missing", nil, []string{"-config", "/nonexistent/seckill.yaml"}, "/nonexistent/seckill.yaml"},
		{"unknown command", nil, []string{"launch"}, `unknown command "launch"`},
		{"unknown command before a missing dsn", map[string]string{"SECKILL_MYSQL_DSN": "", "SECKILL_REDIS_ADDRS": ""}, []string{"migrate", "sideways"}, "want up, down or status"},
		{"unknown command before a bad setting", map[string]string{"SECKILL_LOG_LEVEL": "loud"}, []string{"serv"}, `unknown command "serv"`},
		{"migrate without a dsn", map[string]string{"SECKILL_MYSQL_DSN": "", "SECKILL_REDIS_ADDRS": ""}, []string{"migrate", "up"}, "SECKILL_MYSQL_DSN"},
		{"flag after the command", nil, []string{"serve", "-config", "/nonexistent/after.yaml"}, "/nonexistent/after.yaml"},
		{"flag after migrate", nil, []string{"migrate", "status", "-config", "/nonexistent/m.yaml"}, "/nonexistent/m.yaml"},
		{"unknown flag", nil, []string{"-verbose"}, "verbose"},
		{"admin addr not host:port", map[string]string{"SECKILL_HTTP_ADMIN_ADDR": "9091"}, nil, "http.admin_addr"},
		{"admin addr is the api addr", map[string]string{"SECKILL_HTTP_ADDR": "127.0.0.1:18080", "SECKILL_HTTP_ADMIN_ADDR": "127.0.0.1:18080"}, nil, "http.admin_addr"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			vars := map[string]string{}
			for k, v := range base {
				vars[k] = v
			}
			for k, v := range tc.vars {
				vars[k] = v
			}
			stdout, stderr := newSyncBuffer(), newSyncBuffer()
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- run(ctx, tc.args, env(vars), stdout, stderr) }()
			var err error
			select {
			case err = <-done:
			case <-time.After(10 * time.Second):
				cancel()
				<-done
				t.Fatalf("run with an invalid config did not fail at once; it ran until cancelled\nstdout:\n%s", stdout)
			}
			cancel()
			if err == nil {
				t.Fatalf("run = nil; want an error naming %s", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("run = %q; want it to name %s", err, tc.want)
			}
			if out := stdout.String(); out != "" {
				t.Errorf("a failed start printed on stdout:\n%s", out)
			}
		})
	}
}

// TestTokenCommand: `seckill token -sub` prints a token the service's own
// verifier accepts for that user under the configured secret, issuer and
// audience, and refuses to mint without a secret.
func TestTokenCommand(t *testing.T) {
	t.Parallel()
	secret := "token-command-secret-0123456789abcdef"
	vars := map[string]string{"SECKILL_AUTH_JWT_SECRET": secret, "SECKILL_AUTH_JWT_ISSUER": "https://idp.test"}
	var stdout, stderr bytes.Buffer
	if err := run(context.Background(), []string{"token", "-sub", "u-9", "-ttl", "5m"}, env(vars), &stdout, &stderr); err != nil {
		t.Fatalf("seckill token: %v\n%s", err, stderr.String())
	}
	cfg, err := config.Load("", env(vars))
	if err != nil {
		t.Fatal(err)
	}
	j := cfg.Auth.JWT
	v, err := auth.New(context.Background(), auth.Config{Secret: []byte(j.Secret), Issuer: j.Issuer, Audience: j.Audience, Leeway: j.Leeway, MaxTokenBytes: j.MaxTokenBytes}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if sub, err := v.Verify(context.Background(), strings.TrimSpace(stdout.String())); err != nil || sub != "u-9" {
		t.Errorf("the printed token verifies as %q, %v; want u-9", sub, err)
	}
	if err := run(context.Background(), []string{"token", "-sub", "u-9"}, env(nil), io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), "auth.jwt.secret") {
		t.Errorf("seckill token without a secret = %v; want an error naming auth.jwt.secret", err)
	}
	if err := run(context.Background(), []string{"token"}, env(vars), io.Discard, io.Discard); err == nil {
		t.Error("seckill token without -sub = nil; want a usage error")
	}
}

// TestAdminListener: with http.admin_addr, /metrics (and pprof, at the
// same address as http.debug_addr) is served there and not on the API
// listener, and shutdown closes both.
func TestAdminListener(t *testing.T) {
	t.Parallel()
	api, admin := "127.0.0.1:"+strconv.Itoa(testenv.FreePort(t)), "127.0.0.1:"+strconv.Itoa(testenv.FreePort(t))
	stop, stderr := quickStart(t, map[string]string{"SECKILL_HTTP_ADDR": api, "SECKILL_HTTP_ADMIN_ADDR": admin, "SECKILL_DEBUG_ADDR": admin})
	if code, _ := get(t, "http://"+api+"/metrics", ""); code != http.StatusNotFound {
		t.Errorf("GET /metrics on the API listener = %d; want 404 (served on the admin listener)", code)
	}
	if code, body := get(t, "http://"+admin+"/metrics", ""); code != http.StatusOK || !strings.Contains(body, "seckill_") {
		t.Errorf("GET /metrics on the admin listener = %d; want 200 with the seckill_ metrics", code)
	}
	if code, _ := get(t, "http://"+admin+"/debug/pprof/", ""); code != http.StatusOK {
		t.Errorf("GET /debug/pprof/ on the admin listener (debug_addr the same) = %d; want 200", code)
	}
	if err := stop(); err != nil {
		t.Fatalf("run after cancel = %v; want a clean shutdown\nstderr:\n%s", err, stderr)
	}
	if _, err := http.Get("http://" + admin + "/metrics"); err == nil {
		t.Error("the admin listener still answers after run returned")
	}
}

// TestAdminAddrKeepsOperatorRoutesOffTheAPI: with http.admin_addr set,
// /admin, /internal and /metrics are served on that listener alone (the
// API listener answers them 404 not_found, as a path it does not have),
// and the shop's routes on the API listener alone; without it, the API
// listener serves them all.
func TestAdminAddrKeepsOperatorRoutesOffTheAPI(t *testing.T) {
	t.Parallel()
	const adminToken, payToken = "test-admin-token-0123456789", "test-payment-token-0123456789"
	routes := []struct {
		name, method, path, token string
		want                      int // its answer where it is served
	}{
		{"admin", http.MethodGet, "/admin/v1/skus", adminToken, http.StatusOK},
		{"admin without token", http.MethodGet, "/admin/v1/skus/1", "", http.StatusUnauthorized},
		{"internal", http.MethodPost, "/internal/v1/orders/x/paid", "", http.StatusUnauthorized},
		{"metrics", http.MethodGet, "/metrics", "", http.StatusOK},
		{"shop", http.MethodGet, "/api/v1/skus", "", http.StatusOK},
		{"probe", http.MethodGet, "/healthz", "", http.StatusOK},
	}
	for _, split := range []bool{true, false} {
		t.Run(fmt.Sprintf("admin_addr=%v", split), func(t *testing.T) {
			t.Parallel()
			api := "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
			vars := map[string]string{"SECKILL_HTTP_ADDR": api, "SECKILL_ADMIN_TOKEN": adminToken, "SECKILL_AUTH_PAYMENT_TOKENS": payToken}
			admin := ""
			if split {
				admin = "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
				vars["SECKILL_HTTP_ADMIN_ADDR"] = admin
			}
			quickStart(t, vars)
			for _, r := range routes {
				operator := r.name != "shop" && r.name != "probe"
				onAPI, onAdmin := r.want, http.StatusNotFound
				if split && operator {
					onAPI, onAdmin = http.StatusNotFound, r.want
				}
				if code, body := do(t, r.method, "http://"+api+r.path, r.token); code != onAPI || (onAPI == http.StatusNotFound && !strings.Contains(body, `"not_found"`)) {
					t.Errorf("%s %s on the API listener = %d %s; want %d", r.method, r.path, code, body, onAPI)
				}
				if !split || r.name == "probe" {
					continue
				}
				if code, body := do(t, r.method, "http://"+admin+r.path, r.token); code != onAdmin {
					t.Errorf("%s %s on the admin listener = %d %s; want %d", r.method, r.path, code, body, onAdmin)
				}
			}
		})
	}
}

// quickStart runs the embedded service with vars and waits until it
// serves. stop cancels it and returns run's error (once stopped, the same
// again); the test's end stops it too.
func quickStart(t *testing.T, vars map[string]string) (stop func() error, stderr *syncBuffer) {
	t.Helper()
	stdout, errs := newSyncBuffer(), newSyncBuffer()
	ctx, cancel := context.WithCancel(context.Background())
	var runErr error
	finished := make(chan struct{})
	go func() { runErr = run(ctx, nil, env(vars), stdout, errs); close(finished) }()
	stop = sync.OnceValue(func() error {
		cancel()
		select {
		case <-finished:
			return runErr
		case <-time.After(30 * time.Second):
			return errors.New("run did not return within 30s of cancel")
		}
	})
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("quick start: %v\nstderr:\n%s", err, errs)
		}
	})
	deadline := time.After(30 * time.Second)
	for {
		out, written := stdout.snapshot()
		if strings.Contains(out, "See the stock as an admin") && strings.HasSuffix(out, "\n\n") {
			return stop, errs
		}
		select {
		case <-written:
		case <-finished:
			t.Fatalf("run returned before serving: %v\nstderr:\n%s", runErr, errs)
		case <-deadline:
			t.Fatalf("not serving within 30s\nstderr:\n%s", errs)
		}
	}
}

func get(t *testing.T, url, token string) (int, string) {
	t.Helper()
	return do(t, http.MethodGet, url, token)
}

// do sends a request without a body, with token as its bearer token if
// not empty, and returns the status and body.
func do(t *testing.T, method, url, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
