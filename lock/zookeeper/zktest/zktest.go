// Package zktest starts private ZooKeeper servers: a standalone server or
// a quorum ensemble, each a JVM on free loopback ports; it finds the
// leader and connects clients to them. StartServers takes a context and a
// directory and returns an error, for a program such as the load test;
// Start and StartEnsemble fail the test instead and stop the servers when
// it ends. The lock client's tests, the service's and its load test use
// it; it needs Debian's zookeeper package (Missing says so).
package zktest

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/seckill/seckill/lock/locktest"
)

// ZooKeeper jars as Debian's zookeeper package installs them
// (scripts/deps.sh installs it). SECKILL_TEST_ZOOKEEPER_CLASSPATH (or the
// load test's SECKILL_ZOOKEEPER_CLASSPATH) overrides.
const zkClasspath = "/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar"

// ZooKeeper is a private ZooKeeper: one standalone server or a quorum
// ensemble.
type ZooKeeper struct {
	Servers []*ZKServer
	t       testing.TB // Start's or StartEnsemble's, for WaitLeader
}

// ZKServer is one server of a ZooKeeper.
type ZKServer struct {
	ID   int
	Addr string // client address, 127.0.0.1:port

	t    testing.TB // for Start
	proc locktest.Process
}

// Options shape a ZooKeeper.
type Options struct {
	Servers int // 1: standalone; else an ensemble, odd, at least 3
	// TickTime is the server's tick, default 500ms: sessions of 1s to 10s
	// (2s, zoo.cfg's usual: 4s to 40s). initLimit is 20 ticks, syncLimit 10.
	TickTime time.Duration
}

// Addrs returns the client addresses of every server.
func (z *ZooKeeper) Addrs() []string {
	a := make([]string, len(z.Servers))
	for i, s := range z.Servers {
		a[i] = s.Addr
	}
	return a
}

// StartServers starts the servers, their data and logs under dir, and
// waits until every one of them serves, so that one of them leads.
func StartServers(ctx context.Context, dir string, o Options) (*ZooKeeper, error) {
	if o.Servers < 1 || (o.Servers > 1 && (o.Servers < 3 || o.Servers%2 == 0)) {
		return nil, fmt.Errorf("zktest: %d servers: want 1, or an odd number from 3", o.Servers)
	}
	if why := Missing(); why != "" {
		return nil, errors.New(why)
	}
	z := &ZooKeeper{}
	var peers strings.Builder
	for i := 1; i <= o.Servers; i++ {
		ports := make([]int, 3)
		for j := range ports {
			var err error
			if ports[j], err = locktest.FreePort(); err != nil {
				return nil, err
			}
		}
		z.Servers = append(z.Servers, &ZKServer{ID: i, Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0]))})
		if o.Servers > 1 {
			fmt.Fprintf(&peers, "server.%d=127.0.0.1:%d:%d\n", i, ports[1], ports[2])
		}
	}
	for _, s := range z.Servers {
		if err := s.configure(dir, cmp.Or(o.TickTime, 500*time.Millisecond), peers.String()); err != nil {
			return nil, err
		}
	}
	// A quorum member serves once a quorum has formed: launch them all first.
	var err error
	for _, s := range z.Servers {
		if err = s.proc.Launch(); err != nil {
			break
		}
	}
	for _, s := range z.Servers {
		if err == nil {
			err = s.proc.Await(ctx, startTimeout)
		}
	}
	if err != nil {
		z.Stop()
		return nil, err
	}
	return z, nil
}

// startTimeout bounds a JVM's start on a busy machine.
const startTimeout = 2 * time.Minute

// configure writes the server's zoo.cfg and myid in a directory of its own
// under dir, and sets its JVM's command line: small and quiet, for a
// shared machine. Container nodes are swept every 500ms instead of every
// minute so that tests can see them go. The transaction log is written but
// not fsync'd (forceSync=no): a test's data dies with its directory, and a
// killed JVM's writes survive in the page cache, so an fsync would buy the
// tests nothing but latency.
func (s *ZKServer) configure(dir string, tick time.Duration, peers string) error {
	sdir := filepath.Join(dir, "zookeeper-"+strconv.Itoa(s.ID))
	data := filepath.Join(sdir, "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(data, "myid"), []byte(strconv.Itoa(s.ID)), 0o644); err != nil {
		return err
	}
	_, port, _ := net.SplitHostPort(s.Addr)
	cfg := fmt.Sprintf(`tickTime=%d
initLimit=20
syncLimit=10
forceSync=no
dataDir=%s
clientPort=%s
clientPortAddress=127.0.0.1
maxClientCnxns=0
admin.enableServer=false
4lw.commands.whitelist=srvr,ruok,wchs,mntr,cons
%s`, tick.Milliseconds(), data, port, peers)
	file := filepath.Join(sdir, "zoo.cfg")
	if err := os.WriteFile(file, []byte(cfg), 0o644); err != nil {
		return err
	}
	s.proc = locktest.Process{
		Path: "java",
		Args: []string{"-Xmx128m", "-Xss512k", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
			"-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
			"-Dznode.container.checkIntervalMs=500",
			"-Dzookeeper.jmx.log4j.disable=true",
			"-cp", classpath(), "org.apache.zookeeper.server.quorum.QuorumPeerMain", file},
		Log: filepath.Join(sdir, "zookeeper.log"),
		Ready: func(context.Context) error {
			if s.Mode() == "" {
				return fmt.Errorf("ZooKeeper %d on %s not serving", s.ID, s.Addr)
			}
			return nil
		},
	}
	return nil
}

// Start starts a standalone server (tickTime 500ms: sessions of 1s to
// 10s) in the test's temporary directory, stopped when the test ends.
func Start(t testing.TB) *ZooKeeper {
	t.Helper()
	return start(t, 1)
}

// StartEnsemble starts an ensemble of n servers (n odd, at least 3) and
// waits until every one of them serves, so one of them is the leader.
func StartEnsemble(t testing.TB, n int) *ZooKeeper {
	t.Helper()
	if n < 3 {
		t.Fatalf("StartEnsemble(%d): want an odd n >= 3", n)
	}
	return start(t, n)
}

func start(t testing.TB, n int) *ZooKeeper {
	t.Helper()
	z, err := StartServers(context.Background(), t.TempDir(), Options{Servers: n})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(z.Stop)
	z.t = t
	for _, s := range z.Servers {
		s.t = t
	}
	return z
}

// Stop kills every server.
func (z *ZooKeeper) Stop() {
	for _, s := range z.Servers {
		s.Stop()
	}
}

// Missing says why a ZooKeeper server cannot start here (no java,
// or a jar of the classpath absent), or returns "" when it can. Tests of
// the ZooKeeper backend do not ask: they fail without it, as they must in
// CI; benchmarks skip with the reason.
func Missing() string {
	if _, err := exec.LookPath("java"); err != nil {
		return "java not found (scripts/deps.sh installs zookeeper and its JRE)"
	}
	for _, jar := range filepath.SplitList(classpath()) {
		if _, err := os.Stat(jar); err != nil {
			return fmt.Sprintf("%s absent (scripts/deps.sh installs Debian's zookeeper package; SECKILL_TEST_ZOOKEEPER_CLASSPATH overrides the jars)", jar)
		}
	}
	return ""
}

func classpath() string {
	return cmp.Or(os.Getenv("SECKILL_TEST_ZOOKEEPER_CLASSPATH"), os.Getenv("SECKILL_ZOOKEEPER_CLASSPATH"), zkClasspath)
}

// Leader returns the server whose srvr answer says it leads (the only
// server of a standalone ZooKeeper), or nil when none does right now.
func (z *ZooKeeper) Leader() *ZKServer {
	for _, s := range z.Servers {
		switch s.Mode() {
		case "leader", "standalone":
			return s
		}
	}
	return nil
}

// WaitLeader waits, bounded by timeout, until some server leads, and
// fails the test of Start or StartEnsemble if none does.
func (z *ZooKeeper) WaitLeader(timeout time.Duration) *ZKServer {
	var l *ZKServer
	err := locktest.Poll(context.Background(), "a ZooKeeper leader", timeout, 50*time.Millisecond, func(context.Context) error {
		if l = z.Leader(); l == nil {
			return errors.New("none leads")
		}
		return nil
	})
	if err != nil {
		var logs strings.Builder
		for _, s := range z.Servers {
			log, _ := os.ReadFile(s.proc.Log)
			fmt.Fprintf(&logs, "\n--- ZooKeeper %d on %s (mode %q):\n%s", s.ID, s.Addr, s.Mode(), log[max(0, len(log)-3000):])
		}
		z.t.Fatalf("%v; logs:%s", err, logs.String())
	}
	return l
}

// Mode returns the server's mode from the srvr four-letter word
// ("standalone", "leader", "follower"), or "" when it does not serve.
func (s *ZKServer) Mode() string {
	out, err := s.FourLetter("srvr")
	if err != nil {
		return ""
	}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		if m, ok := strings.CutPrefix(sc.Text(), "Mode: "); ok {
			return strings.TrimSpace(m)
		}
	}
	return ""
}

// FourLetter sends a four-letter word (srvr, wchs, mntr, cons, ruok) and
// returns the answer.
func (s *ZKServer) FourLetter(word string) (string, error) {
	c, err := net.DialTimeout("tcp", s.Addr, time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := io.WriteString(c, word); err != nil {
		return "", err
	}
	b, err := io.ReadAll(c)
	return string(b), err
}

// Stop kills the server (as a crash would) and waits for it to exit.
func (s *ZKServer) Stop() { s.proc.Kill() }

// Restart starts a stopped server again on its ports and data and waits
// until it serves (an ensemble member: until it has rejoined a quorum).
func (s *ZKServer) Restart(ctx context.Context) error { return s.proc.Start(ctx, startTimeout) }

// Start is Restart failing the test of Start or StartEnsemble.
func (s *ZKServer) Start() {
	s.t.Helper()
	if err := s.Restart(context.Background()); err != nil {
		s.t.Fatal(err)
	}
}

// Conn connects a ZooKeeper client to addrs with the given session
// timeout, waits (at most 30s) until it has a session, and closes it when
// the test ends. cb, if not nil, sees every event of the connection.
func Conn(t testing.TB, addrs []string, session time.Duration, cb zk.EventCallback) *zk.Conn {
	t.Helper()
	opts := []func(*zk.Conn){zk.WithLogger(zkQuiet{}), zk.WithLogInfo(false)}
	if cb != nil {
		opts = append(opts, zk.WithEventCallback(cb))
	}
	c, _, err := zk.Connect(addrs, session, func(c *zk.Conn) {
		for _, o := range opts {
			o(c)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	err = locktest.Poll(context.Background(), fmt.Sprintf("a ZooKeeper session with %v", addrs), 30*time.Second, 10*time.Millisecond, func(context.Context) error {
		if st := c.State(); st != zk.StateHasSession {
			return fmt.Errorf("state %v", st)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

type zkQuiet struct{}

func (zkQuiet) Printf(string, ...any) {}
