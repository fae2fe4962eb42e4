// Package zktest starts private ZooKeeper servers for tests: a standalone
// server or a quorum ensemble, each a JVM on free loopback ports in the
// test's temp dir, killed when the test ends; it finds the leader and
// connects clients to them. The lock client's tests and the seckill
// service's use it; it needs Debian's zookeeper package (Missing says so).
package zktest

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/seckill/seckill/lock/internal/locktest"
)

// ZooKeeper jars as Debian's zookeeper package installs them
// (scripts/deps.sh installs it). SECKILL_TEST_ZOOKEEPER_CLASSPATH overrides.
const zkClasspath = "/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar"

// ZooKeeper is a private ZooKeeper: one standalone server or a quorum
// ensemble, each server a JVM on free loopback ports in the test's temp dir,
// killed when the test ends.
type ZooKeeper struct {
	Servers []*ZKServer
}

// ZKServer is one server of a ZooKeeper.
type ZKServer struct {
	ID   int
	Addr string // client address, 127.0.0.1:port

	t   testing.TB
	cfg string
	dir string

	mu  sync.Mutex
	cmd *exec.Cmd
}

// Addrs returns the client addresses of every server.
func (z *ZooKeeper) Addrs() []string {
	a := make([]string, len(z.Servers))
	for i, s := range z.Servers {
		a[i] = s.Addr
	}
	return a
}

// Start starts a standalone server (tickTime 500ms: sessions of
// 1s to 10s), stopped when the test ends.
func Start(t testing.TB) *ZooKeeper {
	t.Helper()
	return start(t, 1)
}

// StartEnsemble starts an ensemble of n servers (n odd, at least 3)
// and waits until every one of them serves, so one of them is the leader.
func StartEnsemble(t testing.TB, n int) *ZooKeeper {
	t.Helper()
	if n < 3 || n%2 == 0 {
		t.Fatalf("StartEnsemble(%d): want an odd n >= 3", n)
	}
	return start(t, n)
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
	if cp := os.Getenv("SECKILL_TEST_ZOOKEEPER_CLASSPATH"); cp != "" {
		return cp
	}
	return zkClasspath
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

// WaitLeader waits, bounded by timeout, until some server leads.
func (z *ZooKeeper) WaitLeader(timeout time.Duration) *ZKServer {
	deadline := time.Now().Add(timeout)
	for {
		if l := z.Leader(); l != nil {
			return l
		}
		if time.Now().After(deadline) {
			var logs strings.Builder
			for _, s := range z.Servers {
				log, _ := os.ReadFile(filepath.Join(s.dir, "zookeeper.log"))
				fmt.Fprintf(&logs, "\n--- ZooKeeper %d on %s (mode %q):\n%s", s.ID, s.Addr, s.Mode(), tail(log, 3000))
			}
			z.Servers[0].t.Fatalf("no ZooKeeper leader within %v; logs:%s", timeout, logs.String())
		}
		time.Sleep(50 * time.Millisecond) // polling for an election, bounded above
	}
}

func start(t testing.TB, n int) *ZooKeeper {
	t.Helper()
	if _, err := exec.LookPath("java"); err != nil {
		t.Fatalf("java not found (scripts/deps.sh installs zookeeper and its JRE): %v", err)
	}
	z := &ZooKeeper{}
	var peers strings.Builder
	for i := 1; i <= n; i++ {
		s := &ZKServer{ID: i, t: t, dir: t.TempDir()}
		s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(locktest.FreePort(t)))
		if n > 1 {
			fmt.Fprintf(&peers, "server.%d=127.0.0.1:%d:%d\n", i, locktest.FreePort(t), locktest.FreePort(t))
		}
		z.Servers = append(z.Servers, s)
	}
	for _, s := range z.Servers {
		_, port, _ := net.SplitHostPort(s.Addr)
		data := filepath.Join(s.dir, "data")
		if err := os.MkdirAll(data, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(data, "myid"), []byte(strconv.Itoa(s.ID)), 0o644); err != nil {
			t.Fatal(err)
		}
		cfg := fmt.Sprintf(`tickTime=500
initLimit=20
syncLimit=10
dataDir=%s
clientPort=%s
clientPortAddress=127.0.0.1
maxClientCnxns=0
admin.enableServer=false
4lw.commands.whitelist=srvr,ruok,wchs,mntr,cons
%s`, data, port, peers.String())
		s.cfg = filepath.Join(s.dir, "zoo.cfg")
		if err := os.WriteFile(s.cfg, []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range z.Servers {
		s.launch()
		t.Cleanup(s.Stop)
	}
	for _, s := range z.Servers {
		s.waitServing(90 * time.Second)
	}
	return z
}

func (s *ZKServer) launch() {
	s.t.Helper()
	cp := classpath()
	log, err := os.OpenFile(filepath.Join(s.dir, "zookeeper.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		s.t.Fatal(err)
	}
	defer log.Close()
	// Small and quiet, for a shared machine. Container nodes
	// are swept every 500ms instead of every minute so that tests can
	// see them go.
	cmd := exec.Command("java", "-Xmx128m", "-Xss512k", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
		"-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
		"-Dznode.container.checkIntervalMs=500",
		"-Dzookeeper.jmx.log4j.disable=true",
		"-cp", cp, "org.apache.zookeeper.server.quorum.QuorumPeerMain", s.cfg)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("start ZooKeeper %d: %v", s.ID, err)
	}
	s.mu.Lock()
	s.cmd = cmd
	s.mu.Unlock()
}

// waitServing polls srvr until the server serves clients (a quorum member
// answers "not currently serving" until it has joined a quorum).
func (s *ZKServer) waitServing(timeout time.Duration) {
	s.t.Helper()
	deadline := time.Now().Add(timeout)
	for s.Mode() == "" {
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(s.dir, "zookeeper.log"))
			s.t.Fatalf("ZooKeeper %d on %s not serving within %v; log:\n%s", s.ID, s.Addr, timeout, tail(log, 3000))
		}
		time.Sleep(100 * time.Millisecond) // polling for a JVM to start, bounded above
	}
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
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
func (s *ZKServer) Stop() {
	s.mu.Lock()
	cmd := s.cmd
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
}

// Start restarts a stopped server on its ports and data and waits until it
// serves again (for an ensemble member: until it has rejoined a quorum).
func (s *ZKServer) Start() {
	s.t.Helper()
	s.launch()
	s.waitServing(90 * time.Second)
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
	deadline := time.Now().Add(30 * time.Second)
	for c.State() != zk.StateHasSession {
		if time.Now().After(deadline) {
			t.Fatalf("no ZooKeeper session with %v within 30s (state %v)", addrs, c.State())
		}
		time.Sleep(10 * time.Millisecond) // polling for the session, bounded above
	}
	return c
}

type zkQuiet struct{}

func (zkQuiet) Printf(string, ...any) {}
