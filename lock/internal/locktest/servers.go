package locktest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisProc is a private redis-server (or redis-server --sentinel) process.
type RedisProc struct {
	Addr string
	Dir  string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{} // closed when cmd has exited (and been waited for)
}

// StartRedisArgs starts redis-server on a free loopback port with args
// added to the usual ones (no persistence, a log file in its own
// directory), waits until it answers PING and kills it when the test ends.
// A server that exits before it answers (another process took its port,
// or with --cluster-enabled its bus port) is started again on another
// port, at most three times.
func StartRedisArgs(t testing.TB, args ...string) *RedisProc {
	t.Helper()
	for attempt := 1; ; attempt++ {
		port := FreePort(t)
		p := &RedisProc{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), Dir: t.TempDir()}
		base := []string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
			"--save", "", "--appendonly", "no", "--dir", p.Dir,
			"--logfile", filepath.Join(p.Dir, "redis.log")}
		err := p.start(t, append(base, args...))
		if err == nil {
			return p
		}
		if !errors.Is(err, errExited) || attempt == 3 {
			t.Fatal(err)
		}
		t.Logf("%v; starting it on another port", err)
	}
}

// errExited is a server that exited before it answered.
var errExited = errors.New("exited before it answered")

// start runs redis-server and waits, at most 10s, until it answers PING.
func (p *RedisProc) start(t testing.TB, args []string) error {
	t.Helper()
	path, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skipf("redis-server not installed: %v", err)
	}
	cmd := exec.Command(path, args...)
	if err := cmd.Start(); err != nil {
		t.Fatalf("start redis-server: %v", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	p.mu.Lock()
	p.cmd, p.exited = cmd, exited
	p.mu.Unlock()
	t.Cleanup(p.Kill)
	c := redis.NewClient(&redis.Options{Addr: p.Addr, MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for c.Ping(context.Background()).Err() != nil {
		select {
		case <-exited:
			log, _ := os.ReadFile(filepath.Join(p.Dir, "redis.log"))
			lines := strings.Split(strings.TrimSpace(string(log)), "\n")
			return fmt.Errorf("redis-server on %s %w: %s", p.Addr, errExited, lines[len(lines)-1])
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redis-server on %s did not answer within 10s", p.Addr)
		}
		time.Sleep(10 * time.Millisecond) // polling for readiness, bounded above
	}
	return nil
}

// Kill sends SIGKILL (a crash: nothing is flushed, nothing is handed over)
// and waits for the process to exit.
func (p *RedisProc) Kill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return
	}
	_ = p.cmd.Process.Kill()
	<-p.exited // waited for by start's goroutine
	p.cmd = nil
}

// SentinelGroup is a master, its replicas and three sentinels with quorum 2.
type SentinelGroup struct {
	Name      string
	Master    *RedisProc
	Replicas  []*RedisProc
	Sentinels []*RedisProc
}

// StartSentinelGroup starts the group and waits until every sentinel knows
// the other two and every replica is in sync.
func StartSentinelGroup(t testing.TB, replicas int) *SentinelGroup {
	t.Helper()
	g := &SentinelGroup{Name: "locktest", Master: StartRedisArgs(t)}
	host, port, _ := net.SplitHostPort(g.Master.Addr)
	for range replicas {
		g.Replicas = append(g.Replicas, StartRedisArgs(t, "--replicaof", host, port))
	}
	for range 3 {
		g.Sentinels = append(g.Sentinels, startSentinel(t, g.Name, g.Master.Addr))
	}
	ctx := context.Background()
	deadline := time.Now().Add(60 * time.Second)
	for !g.settled(ctx, replicas) {
		if time.Now().After(deadline) {
			t.Fatalf("sentinel group not settled within 60s (logs in %s)", g.Sentinels[0].Dir)
		}
		time.Sleep(50 * time.Millisecond) // polling for readiness, bounded above
	}
	return g
}

// startSentinel starts redis-server --sentinel monitoring the master at
// masterAddr under name, with a quorum of 2.
func startSentinel(t testing.TB, name, masterAddr string) *RedisProc {
	t.Helper()
	port := FreePort(t)
	p := &RedisProc{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), Dir: t.TempDir()}
	host, mport, _ := net.SplitHostPort(masterAddr)
	conf := strings.Join([]string{
		"port " + strconv.Itoa(port),
		"bind 127.0.0.1",
		"dir " + p.Dir,
		"logfile " + filepath.Join(p.Dir, "redis.log"),
		fmt.Sprintf("sentinel monitor %s %s %s 2", name, host, mport),
		fmt.Sprintf("sentinel down-after-milliseconds %s 1000", name),
		fmt.Sprintf("sentinel failover-timeout %s 60000", name),
	}, "\n") + "\n"
	file := filepath.Join(p.Dir, "sentinel.conf")
	if err := os.WriteFile(file, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := p.start(t, []string{file, "--sentinel"}); err != nil {
		t.Fatal(err)
	}
	return p
}

func (g *SentinelGroup) settled(ctx context.Context, replicas int) bool {
	for _, r := range g.Replicas {
		c := redis.NewClient(&redis.Options{Addr: r.Addr, MaxRetries: -1})
		info, err := c.Info(ctx, "replication").Result()
		c.Close()
		if err != nil || !strings.Contains(info, "master_link_status:up") {
			return false
		}
	}
	for _, s := range g.Sentinels {
		c := redis.NewSentinelClient(&redis.Options{Addr: s.Addr, MaxRetries: -1})
		peers, err1 := c.Sentinels(ctx, g.Name).Result()
		reps, err2 := c.Replicas(ctx, g.Name).Result()
		c.Close()
		if err1 != nil || err2 != nil || len(peers) != 2 || len(reps) != replicas {
			return false
		}
	}
	return true
}

// SentinelAddrs returns the sentinels' addresses.
func (g *SentinelGroup) SentinelAddrs() []string {
	var addrs []string
	for _, s := range g.Sentinels {
		addrs = append(addrs, s.Addr)
	}
	return addrs
}

// Cluster is a Redis Cluster of private redis-servers.
type Cluster struct {
	Nodes []*RedisProc
}

// StartCluster starts masters*(1+replicas) nodes with cluster mode on, joins
// them with redis-cli --cluster create and waits until every node reports
// cluster_state:ok.
func StartCluster(t testing.TB, masters, replicas int) *Cluster {
	t.Helper()
	if _, err := exec.LookPath("redis-cli"); err != nil {
		t.Skipf("redis-cli not installed: %v", err)
	}
	c := &Cluster{}
	args := []string{"--cluster", "create"}
	for range masters * (1 + replicas) {
		n := StartRedisArgs(t, "--cluster-enabled", "yes", "--cluster-node-timeout", "1000",
			"--cluster-config-file", "nodes.conf")
		c.Nodes = append(c.Nodes, n)
		args = append(args, n.Addr)
	}
	args = append(args, "--cluster-replicas", strconv.Itoa(replicas), "--cluster-yes")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "redis-cli", args...).CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	deadline := time.Now().Add(60 * time.Second)
	for !c.ok(ctx) {
		if time.Now().After(deadline) {
			t.Fatalf("cluster not ok within 60s (logs in %s)", c.Nodes[0].Dir)
		}
		time.Sleep(50 * time.Millisecond) // polling for readiness, bounded above
	}
	return c
}

func (c *Cluster) ok(ctx context.Context) bool {
	for _, n := range c.Nodes {
		rc := redis.NewClient(&redis.Options{Addr: n.Addr, MaxRetries: -1})
		info, err := rc.ClusterInfo(ctx).Result()
		repl, err2 := rc.Info(ctx, "replication").Result()
		rc.Close()
		if err != nil || err2 != nil || !strings.Contains(info, "cluster_state:ok") {
			return false
		}
		if strings.Contains(repl, "role:slave") && !strings.Contains(repl, "master_link_status:up") {
			return false
		}
	}
	return true
}

// Addrs returns every node's address (seed nodes for a ClusterClient).
func (c *Cluster) Addrs() []string {
	var addrs []string
	for _, n := range c.Nodes {
		addrs = append(addrs, n.Addr)
	}
	return addrs
}
