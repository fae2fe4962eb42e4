package harness

import (
	"bufio"
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
	"time"
)

// Lock backends of the instances (Config.Lock).
const (
	LockRedis     = "redis"
	LockZooKeeper = "zookeeper" // a private 3-node ensemble; no Redis at all
)

// FaultZKLeader SIGKILLs the leader of the ZooKeeper ensemble (-lock
// zookeeper) and waits until the two survivors have elected another. The
// old leader stays down: the sale goes on with a bare quorum.
const FaultZKLeader = "zk-leader"

// zkClasspath is where Debian's zookeeper package (scripts/deps.sh installs
// it) puts the server's jars; SECKILL_ZOOKEEPER_CLASSPATH overrides it.
const zkClasspath = "/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar"

// zkEnsemble is a private ZooKeeper: one standalone server or a quorum of
// three, on loopback ports, with the production defaults of zoo.cfg
// (tickTime 2s: the service's default 6s session is within the server's
// [4s, 40s]).
type zkEnsemble struct {
	servers []*zkServer
}

type zkServer struct {
	id   int
	addr string // client address
	p    *proc
}

func (e *zkEnsemble) addrs() []string {
	a := make([]string, len(e.servers))
	for i, s := range e.servers {
		a[i] = s.addr
	}
	return a
}

// startZooKeeper starts the run's 3-node ensemble.
func (r *run) startZooKeeper(ctx context.Context) error {
	e, err := startZKEnsemble(ctx, &r.ps, r.work, 3)
	if err != nil {
		return err
	}
	r.zk = e
	r.event("zookeeper ensemble ready: %s", strings.Join(e.addrs(), " "))
	return nil
}

// ZooKeeper is a private ZooKeeper started by StartZooKeeper, for the
// benchmarks.
type ZooKeeper struct {
	e  *zkEnsemble
	ps procs
}

// StartZooKeeper starts n ZooKeeper servers (1: standalone, else a quorum)
// with their data and logs in dir, and waits until every one serves.
func StartZooKeeper(ctx context.Context, dir string, n int) (*ZooKeeper, error) {
	z := &ZooKeeper{}
	e, err := startZKEnsemble(ctx, &z.ps, dir, n)
	if err != nil {
		z.Stop()
		return nil, err
	}
	z.e = e
	return z, nil
}

// Addrs returns the servers' client addresses.
func (z *ZooKeeper) Addrs() []string { return z.e.addrs() }

// Stop stops every server.
func (z *ZooKeeper) Stop() { z.ps.stopAll(10 * time.Second) }

// startZKEnsemble starts n servers, registered in ps, and waits until every
// one serves clients, so that one of them leads.
func startZKEnsemble(ctx context.Context, ps *procs, work string, n int) (*zkEnsemble, error) {
	if _, err := exec.LookPath("java"); err != nil {
		return nil, fmt.Errorf("zookeeper: java not found (scripts/deps.sh installs zookeeper and its JRE): %w", err)
	}
	cp := os.Getenv("SECKILL_ZOOKEEPER_CLASSPATH")
	if cp == "" {
		cp = zkClasspath
	}
	e := &zkEnsemble{}
	var peers strings.Builder
	for i := 1; i <= n; i++ {
		ports := make([]int, 3)
		for j := range ports {
			p, err := FreePort()
			if err != nil {
				return nil, err
			}
			ports[j] = p
		}
		e.servers = append(e.servers, &zkServer{id: i, addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0]))})
		if n > 1 {
			fmt.Fprintf(&peers, "server.%d=127.0.0.1:%d:%d\n", i, ports[1], ports[2])
		}
	}
	for _, s := range e.servers {
		p, err := zkServerProc(work, s, peers.String(), cp)
		if err != nil {
			return nil, err
		}
		s.p = ps.add(p)
		if err := s.p.start(); err != nil {
			return nil, err
		}
	}
	for _, s := range e.servers {
		if err := poll(ctx, fmt.Sprintf("zookeeper-%d", s.id), 120*time.Second, 200*time.Millisecond, s.serving); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// zkServerProc writes server s's zoo.cfg and myid and returns its JVM,
// small and quiet, so the ensemble leaves the machine to the sale.
func zkServerProc(work string, s *zkServer, peers, classpath string) (*proc, error) {
	dir := filepath.Join(work, fmt.Sprintf("zookeeper-%d", s.id))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "myid"), []byte(strconv.Itoa(s.id)), 0o644); err != nil {
		return nil, err
	}
	_, port, _ := net.SplitHostPort(s.addr)
	cfg := fmt.Sprintf(`tickTime=2000
initLimit=10
syncLimit=5
dataDir=%s
clientPort=%s
clientPortAddress=127.0.0.1
maxClientCnxns=0
admin.enableServer=false
4lw.commands.whitelist=srvr,ruok
%s`, dir, port, peers)
	file := filepath.Join(dir, "zoo.cfg")
	if err := os.WriteFile(file, []byte(cfg), 0o644); err != nil {
		return nil, err
	}
	return &proc{
		name: fmt.Sprintf("zookeeper-%d", s.id), path: "java",
		args: []string{"-Xmx128m", "-Xss512k", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
			"-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-Dzookeeper.jmx.log4j.disable=true",
			"-cp", classpath, "org.apache.zookeeper.server.quorum.QuorumPeerMain", file},
		env: os.Environ(),
		log: filepath.Join(work, fmt.Sprintf("zookeeper-%d.log", s.id)),
	}, nil
}

// mode is the server's srvr answer ("leader", "follower"), or an error
// while it does not serve clients (a quorum member out of a quorum).
func (s *zkServer) mode(ctx context.Context) (string, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", s.addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	if _, err := io.WriteString(c, "srvr"); err != nil {
		return "", err
	}
	sc := bufio.NewScanner(c)
	for sc.Scan() {
		if m, ok := strings.CutPrefix(sc.Text(), "Mode: "); ok {
			return strings.TrimSpace(m), nil
		}
	}
	return "", fmt.Errorf("zookeeper-%d: not serving", s.id)
}

func (s *zkServer) serving(ctx context.Context) error {
	if alive, err := s.p.running(); !alive {
		return fmt.Errorf("zookeeper-%d exited: %v (see %s): %w", s.id, err, s.p.log, errGaveUp)
	}
	_, err := s.mode(ctx)
	return err
}

// leader returns the live server that says it leads.
func (e *zkEnsemble) leader(ctx context.Context) (*zkServer, error) {
	for _, s := range e.servers {
		if alive, _ := s.p.running(); !alive {
			continue
		}
		if m, err := s.mode(ctx); err == nil && (m == "leader" || m == "standalone") {
			return s, nil
		}
	}
	return nil, errors.New("no zookeeper server leads")
}

// zkEnv is the ZooKeeper part of the instances' environment.
func (r *run) zkEnv() []string {
	return []string{
		"SECKILL_LOCK_BACKEND=zookeeper",
		"SECKILL_ZOOKEEPER_ADDRS=" + strings.Join(r.zk.addrs(), ","),
		"SECKILL_ZOOKEEPER_ROOT=/seckill-lt-" + r.id,
	}
}

// zkLeaderFault SIGKILLs the ensemble's leader and waits until a survivor
// leads. The instances' sessions move to the survivors; a holder connected
// to the dead leader keeps its lock only if it reconnects within the
// session timeout, and the zxid fence (a new epoch) orders every lock
// granted after the election above every lock granted before it.
func (r *run) zkLeaderFault(ctx context.Context) error {
	m := &r.monitor
	old, err := r.zk.leader(ctx)
	if err != nil {
		return err
	}
	m.victims = old.p.name + " (ZooKeeper leader)"
	m.faultStart = time.Now()
	r.event("FAULT: SIGKILL the ZooKeeper leader %s (sold %d of %d)", old.addr, m.faultSold, r.cfg.Stock)
	if err := old.p.kill(); err != nil {
		return err
	}
	elected := func(ctx context.Context) error {
		l, err := r.zk.leader(ctx)
		if err != nil {
			return err
		}
		for _, s := range r.zk.servers {
			if alive, _ := s.p.running(); alive && s != l {
				if _, err := s.mode(ctx); err != nil { // the follower must serve too
					return err
				}
			}
		}
		return nil
	}
	if err := poll(ctx, "ZooKeeper election", 90*time.Second, 50*time.Millisecond, elected); err != nil {
		return err
	}
	m.faultBack = time.Now()
	r.event("FAULT: a survivor leads %.1fs after the leader died", m.faultBack.Sub(m.faultStart).Seconds())
	return nil
}

// validateLock checks the lock backend against the fault and the Redis
// options, which mean nothing without Redis.
func validateLock(cfg Config) error {
	switch {
	case cfg.Lock != LockRedis && cfg.Lock != LockZooKeeper:
		return fmt.Errorf("lock %q: want %s or %s", cfg.Lock, LockRedis, LockZooKeeper)
	case cfg.Fault == FaultZKLeader && cfg.Lock != LockZooKeeper:
		return errors.New("the zk-leader fault kills the ZooKeeper leader: use it with -lock zookeeper")
	case cfg.Lock == LockZooKeeper && cfg.Target:
		return errors.New("-lock zookeeper starts its own ensemble: not in target mode")
	case cfg.Lock == LockZooKeeper && (cfg.Fault == FaultRedis || cfg.Fault == FaultFailover || cfg.Redis != "" ||
		len(cfg.RedisAddrs) > 0 || cfg.RedisServers > 1):
		return errors.New("-lock zookeeper runs the service without Redis: no Redis fault, topology or address")
	}
	return nil
}
