package main

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/seckill/seckill/loadtest/verify"
	"github.com/seckill/seckill/lock/locktest"
)

// bigStock is the stock of a case's SKUs: more than any run sells.
const bigStock = 50_000_000

// runCase runs case c on variant v, the run's i-th: a database of its own,
// a freshly started instance (or design's server), its SKUs, one k6 run
// between two readings of the counters, then the database's verdict.
func (b *bench) runCase(ctx context.Context, c benchCase, v variant, i int) (row, error) {
	r := row{Case: c.name, Variant: v.label, Load: c.load(), VUs: c.vus, Rate: c.rate, Verified: "n/a", LoadAvg: loadAverage()}
	d, err := b.openDatabase(ctx, c, i)
	defer d.close()
	if err != nil {
		return r, err
	}
	port, err := locktest.FreePort()
	if err != nil {
		return r, err
	}
	base := "http://127.0.0.1:" + strconv.Itoa(port)
	env, debugBase, err := b.serviceEnv(ctx, c, v, i, d, port)
	if err != nil {
		return r, err
	}
	svc, stop, err := b.startService(ctx, c, v, i, env)
	if err != nil {
		return r, err
	}
	defer stop()
	if err := waitReady(ctx, base); err != nil {
		return r, err
	}
	ids, err := createSKUs(ctx, base, c)
	if err != nil {
		return r, err
	}
	m, err := b.measure(ctx, c, i, base, ids, svc.Process.Pid, debugBase, d)
	if err != nil {
		return r, err
	}
	if slices.Contains(v.env, "SECKILL_EVENTS_ENABLED=true") { // an -ab-ref side may predate the outbox's runs
		if r.Unpublished, err = unpublished(ctx, d.db); err != nil {
			return r, err
		}
	}
	r.RSSMB = peakRSS(svc.Process.Pid)
	if !c.ceiling && !c.design() { // the service's own histograms (commit, lock, HTTP), for the tails
		if err := fetchTo(ctx, base+"/metrics", filepath.Join(b.o.out, fmt.Sprintf("metrics-%02d.txt", i)), 10*time.Second); err != nil {
			fmt.Fprintln(os.Stderr, "bench: metrics:", err)
		}
	}
	if c.held > 0 {
		r.Held = c.held
		m.held.fill(&r)
	} else if err := readSummary(m.summary, &r); err != nil {
		return r, err
	}
	m.fill(&r, c)
	if !c.ceiling {
		if r.Verified, err = verifyCase(ctx, d.db, c, ids, r.Orders); err != nil {
			return r, err
		}
	}
	return r, nil
}

// caseDB is a case's own database, on the shared server or the replicated
// primary.
type caseDB struct {
	admin      *sql.DB // the server: its statement counter, the database's creation
	db         *sql.DB // the case's database
	name, dsn  string
	replicaEnv []string // the service's replica settings, on the replicated primary
}

// openDatabase creates the case's database. The caller defers close at
// once, whatever the error.
func (b *bench) openDatabase(ctx context.Context, c benchCase, i int) (*caseDB, error) {
	d := &caseDB{}
	serverDSN, replicaEnv, err := b.rp.server(ctx, c, b.o.dsn)
	if err != nil {
		return d, err
	}
	d.replicaEnv = replicaEnv
	mc, err := mysql.ParseDSN(serverDSN)
	if err != nil {
		return d, err
	}
	if d.admin, err = sql.Open("mysql", mc.FormatDSN()); err != nil {
		return d, err
	}
	name := fmt.Sprintf("seckill_bench_%d_%d", time.Now().Unix(), i)
	if _, err := d.admin.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		return d, fmt.Errorf("create database: %w", err)
	}
	d.name = name
	mc.DBName = name
	d.dsn = mc.FormatDSN()
	d.db, err = sql.Open("mysql", d.dsn)
	return d, err
}

// close drops the database and closes the pools.
func (d *caseDB) close() {
	if d.db != nil {
		d.db.Close()
	}
	if d.admin == nil {
		return
	}
	if d.name != "" {
		_, _ = d.admin.ExecContext(context.Background(), "DROP DATABASE "+d.name)
	}
	d.admin.Close()
}

// serviceEnv is the environment of the case's instance on port: its
// database, the benchmark's Redis (or the case's topology, ZooKeeper,
// replica), the case's settings, then the variant's; and the debug
// address's base URL with -profile.
func (b *bench) serviceEnv(ctx context.Context, c benchCase, v variant, i int, d *caseDB, port int) (env []string, debugBase string, err error) {
	env = append(os.Environ(),
		"SECKILL_MYSQL_DSN="+d.dsn,
		"SECKILL_REDIS_ADDRS="+b.rs.Addr,
		"SECKILL_ADMIN_TOKEN="+token,
		"SECKILL_HTTP_ADDR=127.0.0.1:"+strconv.Itoa(port),
		"SECKILL_LOG_LEVEL=error",
		"SECKILL_LOCK_PREFIX="+fmt.Sprintf("bench%d:", i),
		"SECKILL_BENCH_ENDPOINTS=true",
		// Buyers are verified (auth.shopper jwt, the default); k6 signs
		// their HS256 tokens with the same secret.
		"SECKILL_AUTH_JWT_SECRET="+shopperSecret,
		"SECKILL_AUTH_ORDER_ID_KEY="+orderIDKey,
	)
	if c.access != "" { // later entries win: the default level, the access log as the case says
		env = append(env, "SECKILL_LOG_LEVEL=info", "SECKILL_LOG_ACCESS="+strconv.FormatBool(c.access == "on"))
	}
	if c.noJWT {
		env = append(env, "SECKILL_AUTH_SHOPPER=none")
	}
	topoEnv, err := b.tp.env(ctx, c) // later entries win: the topology's Redis
	if err != nil {
		return nil, "", err
	}
	env = append(env, topoEnv...)
	if c.zk {
		env = append(env, zkEnv(b.o, i)...)
	}
	env = append(env, d.replicaEnv...)
	env = append(env, v.env...)
	if b.o.profile {
		dport, err := locktest.FreePort()
		if err != nil {
			return nil, "", err
		}
		debugBase = "http://127.0.0.1:" + strconv.Itoa(dport)
		env = append(env, "SECKILL_DEBUG_ADDR=127.0.0.1:"+strconv.Itoa(dport))
	}
	return env, debugBase, nil
}

// startService migrates the case's database and starts the variant's
// service, or the design's server, logging into the results directory;
// stop ends it (SIGTERM, then SIGKILL after 30s).
func (b *bench) startService(ctx context.Context, c benchCase, v variant, i int, env []string) (svc *exec.Cmd, stop func(), err error) {
	mig := exec.CommandContext(ctx, v.bin, "migrate", "up")
	mig.Env = env
	if out, err := mig.CombinedOutput(); err != nil {
		return nil, nil, fmt.Errorf("migrate: %v\n%s", err, out)
	}
	logf, err := os.Create(filepath.Join(b.o.out, fmt.Sprintf("service-%02d.log", i)))
	if err != nil {
		return nil, nil, err
	}
	svc = exec.Command(v.bin, "serve")
	if c.design() {
		svc = exec.Command(v.compare, "-design", c.strategy)
	}
	svc.Env, svc.Stdout, svc.Stderr = env, logf, logf
	if err := svc.Start(); err != nil {
		logf.Close()
		return nil, nil, err
	}
	return svc, func() {
		defer logf.Close()
		_ = svc.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = svc.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = svc.Process.Kill()
			<-done
		}
	}, nil
}

// createSKUs creates the case's SKUs; a sold-out case's one unit is sold
// at once, so that every answer of the run is a refusal.
func createSKUs(ctx context.Context, base string, c benchCase) ([]int64, error) {
	var ids []int64
	for range max(c.skus, 1) {
		stock := int64(bigStock)
		if c.soldOut {
			stock = 1
		}
		id, err := createSKU(ctx, base, stock)
		if err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	if c.soldOut {
		if err := buyOnce(ctx, base, ids[0]); err != nil {
			return nil, err
		}
	}
	return ids, nil
}

// counters are the servers' counts read before and after a run: the
// server's statements, the benchmark Redis's commands, the SKUs'
// versions (one per committed batch).
type counters struct{ questions, commands, versions int64 }

func (b *bench) counters(ctx context.Context, d *caseDB) (c counters, err error) {
	if c.questions, err = questions(ctx, d.admin); err != nil {
		return c, err
	}
	if c.commands, err = b.rs.commands(ctx); err != nil {
		return c, err
	}
	c.versions, err = versions(ctx, d.db)
	return c, err
}

// measurement is what one k6 run left: its summary, the counters and CPU
// around it, its wall time and k6's own CPU.
type measurement struct {
	summary        string
	before, after  counters
	cpu0, cpu1     cpuSample
	wall, k6CPU    time.Duration
	standaloneOnly bool       // the Redis counter counts this case's commands (no topology)
	held           heldResult // a held-connections case's answers, in place of k6's summary
}

// measure runs k6 against base (the ceiling's path for a ceiling case),
// reading the counters and the CPU before and after, and the profiles
// with -profile.
func (b *bench) measure(ctx context.Context, c benchCase, i int, base string, ids []int64, svcPID int, debugBase string, d *caseDB) (measurement, error) {
	m := measurement{summary: filepath.Join(b.o.out, fmt.Sprintf("k6-%02d.json", i)), standaloneOnly: c.topology == ""}
	var err error
	if m.before, err = b.counters(ctx, d); err != nil {
		return m, err
	}
	if c.held > 0 {
		return b.measureHeld(ctx, c, i, base, ids, svcPID, debugBase, d, m)
	}
	k := b.k6Command(ctx, c, i, base, ids, m.summary)
	var k6out bytes.Buffer
	k.Stdout, k.Stderr = &k6out, &k6out
	var prof profiler
	if debugBase != "" {
		prof.start(ctx, debugBase, b.o.out, fmt.Sprintf("%02d", i), b.o.duration)
	}
	m.cpu0 = sampleCPU(svcPID, b.dbPID, b.rs.Pid(), b.brokerPID)
	started := time.Now()
	err = k.Run()
	m.wall = time.Since(started)
	m.cpu1 = sampleCPU(svcPID, b.dbPID, b.rs.Pid(), b.brokerPID)
	if k.ProcessState != nil {
		m.k6CPU = k.ProcessState.UserTime() + k.ProcessState.SystemTime()
	}
	for _, perr := range prof.wait() {
		fmt.Fprintln(os.Stderr, "bench:", perr)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, k6out.String())
		var exit *exec.ExitError
		if !errors.As(err, &exit) { // a failed threshold still wrote its summary
			return m, fmt.Errorf("k6: %w", err)
		}
	}
	m.after, err = b.counters(ctx, d)
	return m, err
}

// k6Command is the k6 run of bench.js for case c against base.
func (b *bench) k6Command(ctx context.Context, c benchCase, i int, base string, ids []int64, summary string) *exec.Cmd {
	path := "/api/v1/orders"
	if c.ceiling {
		path = "/bench/constant"
	}
	skuIDs := make([]string, len(ids))
	for j, id := range ids {
		skuIDs[j] = strconv.FormatInt(id, 10)
	}
	k := exec.CommandContext(ctx, b.k6, "run", "--quiet", "--no-color", "--no-usage-report",
		"-e", "URL="+base, "-e", "TARGET_PATH="+path, "-e", "SKU_IDS="+strings.Join(skuIDs, ","),
		"-e", "VUS="+strconv.Itoa(c.vus), "-e", "RATE="+strconv.Itoa(c.rate), "-e", "DURATION="+b.o.duration.String(),
		"-e", "SUMMARY="+summary, "-e", fmt.Sprintf("RUN_ID=b%d", i),
		filepath.Join(b.root, "bench", "bench.js"))
	k.Env = append(os.Environ(), "SHOPPER_SECRET="+shopperSecret) // not on the command line
	return k
}

// fill computes the row's costs from the measurement: CPU, statements and
// Redis commands per request, batches.
func (m measurement) fill(r *row, c benchCase) {
	r.CPU = costOf(m.cpu0, m.cpu1, m.k6CPU, m.wall, r.Requests)
	// Statements: the run's, less this program's own two in between
	// (the version sum and the second status read, which counts itself).
	stmts := max(float64(m.after.questions-m.before.questions)-2, 0)
	switch {
	case r.Orders > 0:
		r.SQLPerOrder = stmts / float64(r.Orders)
	case r.Rejects > 0:
		r.SQLPerReject = stmts / float64(r.Rejects)
	}
	if r.Requests > 0 && m.standaloneOnly { // the counter is the standalone server's
		r.RedisPerReq = float64(m.after.commands-m.before.commands-1) / float64(r.Requests)
	}
	r.Batches = m.after.versions - m.before.versions
}

// verifyCase checks every SKU of the case in the database and the orders
// against the 201 answers: "ok", or what was violated.
func verifyCase(ctx context.Context, db *sql.DB, c benchCase, ids []int64, answered int64) (string, error) {
	verdict := "ok"
	for _, id := range ids {
		want := verify.Expect{InitialStock: bigStock}
		if c.soldOut {
			want = verify.Expect{InitialStock: 1, SoldOut: true}
		}
		rep, err := verify.CheckDB(ctx, db, id, want)
		if err != nil {
			return verdict, err
		}
		if !rep.OK() {
			verdict = "VIOLATED: " + strings.Join(rep.Names(), ",")
		}
	}
	var orders int64
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM orders").Scan(&orders); err != nil {
		return verdict, err
	}
	want := answered
	if c.soldOut {
		want++
	}
	if orders != want {
		verdict = fmt.Sprintf("VIOLATED: %d orders in the database, %d answered 201", orders, want)
	}
	return verdict, nil
}
