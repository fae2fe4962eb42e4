// Package mariadb starts throwaway MariaDB servers for the tests and the
// load test's failover fault: a primary and its replicas (GTID
// replication, log_slave_updates, semi-sync available), each a private
// mariadbd on a free loopback port with its own data directory, and a
// TCP address that can be moved from one server to another (Mover).
// Nothing here touches a server it did not start.
package mariadb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/seckill/seckill/lock/locktest"
)

// AppUser is the account the service uses on these servers: every
// privilege a sale needs and none that bypasses read_only, so that a
// demoted primary refuses its writes (1290) as it would in production.
const AppUser = "app"

// initSQL runs at every start, outside the binary log (a replica's own
// GTIDs would fork its history): root over TCP for the harness and
// replication, and AppUser.
const initSQL = `SET sql_log_bin = 0;
CREATE USER IF NOT EXISTS 'root'@'127.0.0.1';
GRANT ALL PRIVILEGES ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION;
CREATE USER IF NOT EXISTS '` + AppUser + `'@'127.0.0.1';
GRANT SELECT, INSERT, UPDATE, DELETE, CREATE, DROP, ALTER, INDEX, REFERENCES, CREATE TEMPORARY TABLES, LOCK TABLES, REPLICATION MASTER ADMIN ON *.* TO '` + AppUser + `'@'127.0.0.1';
`

// Server is one private mariadbd.
type Server struct {
	ID   int    // its server_id
	Addr string // 127.0.0.1:port
	proc locktest.Process
}

// RootDSN is the server's DSN for root, without a database.
func (s *Server) RootDSN() string { return "root@tcp(" + s.Addr + ")/" }

// AppDSN is the DSN of AppUser on addr (the server's, or a Mover's) for db.
func AppDSN(addr, db string) string { return AppUser + "@tcp(" + addr + ")/" + db }

// Template installs a data directory once (mariadb-install-db, small
// InnoDB log) for Start to copy.
func Template(ctx context.Context, dir string) (string, error) {
	data := filepath.Join(dir, "template")
	tmp := filepath.Join(dir, "tmp")
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return "", err
	}
	args := []string{"--no-defaults", "--datadir=" + data, "--tmpdir=" + tmp, "--auth-root-authentication-method=normal",
		"--skip-test-db", "--skip-name-resolve", "--innodb-log-file-size=8M"}
	if os.Geteuid() == 0 {
		args = append(args, "--user=root")
	}
	ictx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ictx, bin("mariadb-install-db"), args...).CombinedOutput(); err != nil {
		return "", fmt.Errorf("mariadb-install-db: %w\n%s", err, out)
	}
	return data, nil
}

// Start copies template into dir and starts a server with the given
// server_id on a free port: binary log on (ROW, log_slave_updates), so
// it can be a primary, a replica, and a replica promoted.
func Start(ctx context.Context, template, dir string, id int, extra ...string) (*Server, error) {
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if out, err := exec.CommandContext(ctx, "cp", "-a", template, data).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("copy the template: %w: %s", err, out)
	}
	init := filepath.Join(dir, "init.sql")
	if err := os.WriteFile(init, []byte(initSQL), 0o644); err != nil {
		return nil, err
	}
	s := &Server{ID: id}
	var err error
	for range 3 { // a port taken between the probe and the bind is retried
		var port int
		if port, err = locktest.FreePort(); err != nil {
			return nil, err
		}
		s.Addr = fmt.Sprintf("127.0.0.1:%d", port)
		args := []string{"--no-defaults", "--datadir=" + data, "--tmpdir=" + filepath.Join(dir, ".."),
			"--bind-address=127.0.0.1", "--port=" + strconv.Itoa(port), "--socket=" + filepath.Join(dir, "s.sock"),
			"--pid-file=" + filepath.Join(dir, "m.pid"), "--skip-name-resolve", "--init-file=" + init,
			"--server-id=" + strconv.Itoa(id), "--report-host=127.0.0.1", "--report-port=" + strconv.Itoa(port), "--log-bin=binlog", "--log-slave-updates", "--binlog-format=ROW",
			"--innodb-buffer-pool-size=64M", "--innodb-log-file-size=8M", "--max-connections=400",
			"--character-set-server=utf8mb4", "--collation-server=utf8mb4_general_ci"}
		if os.Geteuid() == 0 {
			args = append(args, "--user=root")
		}
		// Without --log-error the error log is the process's output.
		s.proc = locktest.Process{Path: bin("mariadbd"), Args: append(args, extra...),
			Log: filepath.Join(dir, "error.log"), Ready: ping(s.RootDSN())}
		if err = s.Restart(ctx); err == nil {
			return s, nil
		}
	}
	return nil, err
}

// Restart starts the server again on its port and data (after Kill) and
// waits until it answers.
func (s *Server) Restart(ctx context.Context) error {
	if err := s.proc.Start(ctx, time.Minute); err != nil {
		return fmt.Errorf("mariadbd %d: %w", s.ID, err)
	}
	return nil
}

// ping answers nil once the server at dsn answers.
func ping(dsn string) func(context.Context) error {
	return func(ctx context.Context) error {
		db, err := sql.Open("mysql", dsn)
		if err != nil {
			return err
		}
		defer db.Close()
		return db.PingContext(ctx)
	}
}

// CreateDatabase creates the database name on the server at dsn and
// returns the DSN of it.
func CreateDatabase(ctx context.Context, dsn, name string) (string, error) {
	mc, err := mysql.ParseDSN(dsn)
	if err != nil {
		return "", fmt.Errorf("mysql dsn: %w", err)
	}
	mc.DBName = ""
	db, err := sql.Open("mysql", mc.FormatDSN())
	if err != nil {
		return "", err
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		return "", fmt.Errorf("create database %s (is MariaDB running on %s?): %w", name, mc.Addr, err)
	}
	mc.DBName = name
	return mc.FormatDSN(), nil
}

// EnsureLocal makes sure the server at dsn answers, starting the system's
// mariadbd (as its Debian package would) when it is local and down: the
// load test's shared server.
func EnsureLocal(ctx context.Context, dsn string, log io.Writer) error {
	if ping(dsn)(ctx) == nil {
		return nil
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return fmt.Errorf("mysql dsn: %w", err)
	}
	if host, _, _ := net.SplitHostPort(cfg.Addr); host != "127.0.0.1" && host != "localhost" {
		return fmt.Errorf("MySQL at %s does not answer", cfg.Addr)
	}
	fmt.Fprintln(log, "MariaDB is down: starting", bin("mariadbd"))
	if err := os.MkdirAll("/run/mysqld", 0o755); err != nil {
		return fmt.Errorf("start MariaDB: %w", err)
	}
	if out, err := exec.CommandContext(ctx, "chown", "mysql:mysql", "/run/mysqld").CombinedOutput(); err != nil {
		return fmt.Errorf("start MariaDB: chown /run/mysqld: %w: %s", err, out)
	}
	if out, err := exec.CommandContext(ctx, "start-stop-daemon", "--start", "--oknodo", "--background",
		"--exec", bin("mariadbd")).CombinedOutput(); err != nil {
		return fmt.Errorf("start MariaDB: %w: %s", err, out)
	}
	return locktest.Poll(ctx, "MariaDB", 60*time.Second, 250*time.Millisecond, ping(dsn))
}

// Kill SIGKILLs the server, as the loss of its machine would, and waits
// for it to exit.
func (s *Server) Kill() { s.proc.Kill() }

// Exec runs statements on the server as root.
func (s *Server) Exec(ctx context.Context, stmts ...string) error {
	db, err := sql.Open("mysql", s.RootDSN())
	if err != nil {
		return err
	}
	defer db.Close()
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	for _, q := range stmts {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("server %d: %s: %w", s.ID, q, err)
		}
	}
	return nil
}

// Query reads one row of the server as root into dest.
func (s *Server) Query(ctx context.Context, q string, dest ...any) error {
	db, err := sql.Open("mysql", s.RootDSN())
	if err != nil {
		return err
	}
	defer db.Close()
	return db.QueryRowContext(ctx, q).Scan(dest...)
}

// Set is a primary and its replicas.
type Set struct {
	Primary  *Server
	Replicas []*Server
	template string
	dir      string
	extra    []*Server // AddReplica's
}

// StartSet starts a primary (server_id 1) and n replicas (2..n+1) in dir,
// the replicas following it with GTIDs (MASTER_USE_GTID=slave_pos) and
// read-only. semiSync turns semi-sync replication on (AFTER_SYNC, 1 s
// timeout, as commonly run): it falls back to asynchronous silently.
func StartSet(ctx context.Context, dir string, n int, semiSync bool) (*Set, error) {
	template, err := Template(ctx, dir)
	if err != nil {
		return nil, err
	}
	set := &Set{template: template, dir: dir}
	if set.Primary, err = Start(ctx, template, filepath.Join(dir, "s1"), 1); err != nil {
		return set, err
	}
	if semiSync {
		if err := set.Primary.Exec(ctx, "SET GLOBAL rpl_semi_sync_master_enabled = 1", "SET GLOBAL rpl_semi_sync_master_timeout = 1000",
			"SET GLOBAL rpl_semi_sync_master_wait_point = AFTER_SYNC"); err != nil {
			return set, err
		}
	}
	for i := range n {
		r, err := Start(ctx, template, filepath.Join(dir, fmt.Sprintf("s%d", i+2)), i+2)
		if err != nil {
			return set, err
		}
		set.Replicas = append(set.Replicas, r)
		if semiSync {
			if err := r.Exec(ctx, "SET GLOBAL rpl_semi_sync_slave_enabled = 1"); err != nil {
				return set, err
			}
		}
		if err := r.Follow(ctx, set.Primary); err != nil {
			return set, err
		}
	}
	return set, nil
}

// AddReplica starts a new, empty server with server_id id that follows
// primary from the start of its history: an old primary rebuilt as a
// replica of the one promoted. It is not in set.Replicas; set.Stop stops
// it all the same.
func (set *Set) AddReplica(ctx context.Context, id int, primary *Server) (*Server, error) {
	s, err := Start(ctx, set.template, filepath.Join(set.dir, fmt.Sprintf("s%d", id)), id)
	if err != nil {
		return nil, err
	}
	set.extra = append(set.extra, s)
	return s, s.Follow(ctx, primary)
}

// Follow makes s a read-only replica of primary from its own GTID
// position.
func (s *Server) Follow(ctx context.Context, primary *Server) error {
	host, port, _ := net.SplitHostPort(primary.Addr)
	return s.Exec(ctx, "STOP SLAVE", "SET GLOBAL read_only = 1",
		fmt.Sprintf("CHANGE MASTER TO MASTER_HOST = '%s', MASTER_PORT = %s, MASTER_USER = 'root', MASTER_USE_GTID = slave_pos, MASTER_CONNECT_RETRY = 1", host, port),
		"START SLAVE")
}

// Promote makes s a primary: replication stopped and forgotten, writes
// allowed.
func (s *Server) Promote(ctx context.Context) error {
	return s.Exec(ctx, "STOP SLAVE", "RESET SLAVE ALL", "SET GLOBAL read_only = 0")
}

// StopIO stops s's replication IO thread: it receives nothing more (a
// slow or broken link) and applies what it has.
func (s *Server) StopIO(ctx context.Context) error { return s.Exec(ctx, "STOP SLAVE IO_THREAD") }

// StartIO starts it again.
func (s *Server) StartIO(ctx context.Context) error { return s.Exec(ctx, "START SLAVE IO_THREAD") }

// Applied is the GTID position s has applied (@@gtid_slave_pos).
func (s *Server) Applied(ctx context.Context) (string, error) {
	var pos string
	err := s.Query(ctx, "SELECT @@gtid_slave_pos", &pos)
	return pos, err
}

// WaitApplied waits, at most d, until s's SQL thread has applied all it
// received.
func (s *Server) WaitApplied(ctx context.Context, d time.Duration) error {
	wctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	db, err := sql.Open("mysql", s.RootDSN())
	if err != nil {
		return err
	}
	defer db.Close()
	for {
		rows, err := db.QueryContext(wctx, "SHOW SLAVE STATUS")
		if err == nil {
			idle, err := sqlThreadIdle(rows)
			if err == nil && idle {
				return nil
			}
		}
		select {
		case <-wctx.Done():
			return fmt.Errorf("server %d: relay log not applied within %v", s.ID, d)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// sqlThreadIdle reads SHOW SLAVE STATUS: the SQL thread has read all of
// the relay log (or replication is off).
func sqlThreadIdle(rows *sql.Rows) (bool, error) {
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return false, err
	}
	if !rows.Next() {
		return true, rows.Err()
	}
	vals := make([]sql.RawBytes, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if err := rows.Scan(ptrs...); err != nil {
		return false, err
	}
	for i, c := range cols {
		if c == "Slave_SQL_Running_State" {
			st := string(vals[i])
			return strings.Contains(st, "has read all relay log") || st == "", nil
		}
	}
	return false, errors.New("no Slave_SQL_Running_State")
}

// Stop kills every server of the set.
func (set *Set) Stop() {
	if set == nil {
		return
	}
	if set.Primary != nil {
		set.Primary.Kill()
	}
	for _, r := range append(set.Replicas, set.extra...) {
		r.Kill()
	}
}

func bin(name string) string {
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	return "/usr/sbin/" + name
}

// Register the driver for sql.Open("mysql", ...).
var _ = mysql.ErrInvalidConn
