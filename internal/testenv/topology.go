package testenv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisProc is a private redis-server (or redis-server --sentinel) process
// started with arguments of the test's choosing.
type RedisProc struct {
	Addr string
	Port int
	Dir  string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{} // closed when cmd has exited (and been waited for)
}

// StartRedisArgs starts redis-server on a free loopback port with args
// added to the usual ones (no persistence, a log file in its own
// directory), waits until it answers PING and kills it when the test ends.
// A server that exits before it answers (another process took its port,
// or with --cluster-enabled its bus port, the port + 10000, since they
// were found free) is started again on another port, at most three times.
func StartRedisArgs(t testing.TB, args ...string) *RedisProc {
	t.Helper()
	for attempt := 1; ; attempt++ {
		p := &RedisProc{Port: FreePort(t), Dir: t.TempDir()}
		p.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(p.Port))
		base := []string{"--port", strconv.Itoa(p.Port), "--bind", "127.0.0.1",
			"--save", "", "--appendonly", "no", "--dir", p.Dir,
			"--logfile", filepath.Join(p.Dir, "redis.log")}
		err := p.start(t, "redis-server", append(base, args...))
		if err == nil {
			return p
		}
		if !errors.Is(err, errExited) || attempt == 3 {
			t.Fatal(err)
		}
		t.Logf("%v; starting it on another port", err)
	}
}

// StartSentinel starts redis-server --sentinel monitoring the master at
// masterAddr under name, with a quorum of 2. It declares the master down
// after 1s without an answer.
func StartSentinel(t testing.TB, name, masterAddr string) *RedisProc {
	t.Helper()
	p := &RedisProc{Port: FreePort(t), Dir: t.TempDir()}
	p.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(p.Port))
	host, port, _ := net.SplitHostPort(masterAddr)
	// failover-timeout also delays Sentinel's "fix" of a replica whose
	// master port differs from the monitored one (ours replicate through a
	// ReplicationLink), so it stays well above a test's run time; it is
	// otherwise only the retry delay (twice as long) after a split vote.
	conf := strings.Join([]string{
		"port " + strconv.Itoa(p.Port),
		"bind 127.0.0.1",
		"dir " + p.Dir,
		"logfile " + filepath.Join(p.Dir, "sentinel.log"),
		fmt.Sprintf("sentinel monitor %s %s %s 2", name, host, port),
		fmt.Sprintf("sentinel down-after-milliseconds %s 1000", name),
		fmt.Sprintf("sentinel failover-timeout %s 60000", name),
		fmt.Sprintf("sentinel parallel-syncs %s 1", name),
	}, "\n") + "\n"
	file := filepath.Join(p.Dir, "sentinel.conf")
	if err := os.WriteFile(file, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := p.start(t, "redis-server", []string{file, "--sentinel"}); err != nil {
		t.Fatal(err)
	}
	return p
}

// errExited is a server that exited before it answered.
var errExited = errors.New("exited before it answered")

// start runs bin and waits, at most 10s, until it answers PING.
func (p *RedisProc) start(t testing.TB, bin string, args []string) error {
	t.Helper()
	path, err := exec.LookPath(bin)
	if err != nil {
		t.Skipf("%s not installed: %v", bin, err)
	}
	cmd := exec.Command(path, args...)
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
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
			return fmt.Errorf("%s on %s %w: %s", bin, p.Addr, errExited, lastLine(log))
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s on %s did not answer within 10s", bin, p.Addr)
		}
		time.Sleep(10 * time.Millisecond) // polling for readiness, bounded above
	}
	return nil
}

// lastLine is the last non-empty line of a log.
func lastLine(log []byte) string {
	lines := strings.Split(strings.TrimSpace(string(log)), "\n")
	return lines[len(lines)-1]
}

// Client returns a go-redis client of p, closed when the test ends.
func (p *RedisProc) Client(t testing.TB) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: p.Addr})
	t.Cleanup(func() { c.Close() })
	return c
}

func (p *RedisProc) alive() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd != nil
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

// ReplicationLink is a TCP relay between a replica and its master. Freeze
// makes the replica deaf to the master from that instant, deterministically:
// every byte the master sends afterwards is dropped, while the link stays
// up and the replica's acknowledgements still reach the master.
type ReplicationLink struct {
	Addr   string
	target string
	ln     net.Listener

	mu     sync.Mutex
	frozen bool
	conns  []net.Conn
	wg     sync.WaitGroup
}

// StartReplicationLink relays connections on a free loopback port to target.
func StartReplicationLink(t testing.TB, target string) *ReplicationLink {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := &ReplicationLink{Addr: ln.Addr().String(), target: target, ln: ln}
	l.wg.Add(1)
	go l.accept()
	t.Cleanup(l.Cut)
	return l
}

func (l *ReplicationLink) accept() {
	defer l.wg.Done()
	for {
		down, err := l.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.DialTimeout("tcp", l.target, 2*time.Second)
		if err != nil {
			down.Close()
			continue
		}
		l.mu.Lock()
		l.conns = append(l.conns, down, up)
		l.mu.Unlock()
		l.wg.Add(2)
		go l.pipe(down, up, false) // replica → master: always relayed
		go l.pipe(up, down, true)  // master → replica: dropped once frozen
	}
}

func (l *ReplicationLink) pipe(from, to net.Conn, freezable bool) {
	defer l.wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := from.Read(buf)
		if n > 0 {
			l.mu.Lock()
			drop := freezable && l.frozen
			l.mu.Unlock()
			if !drop {
				if _, werr := to.Write(buf[:n]); werr != nil {
					return
				}
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				from.Close()
			}
			to.Close()
			return
		}
	}
}

// Freeze drops everything the master sends from now on.
func (l *ReplicationLink) Freeze() {
	l.mu.Lock()
	l.frozen = true
	l.mu.Unlock()
}

// Cut closes the link and every relayed connection, without forwarding
// anything still held.
func (l *ReplicationLink) Cut() {
	l.ln.Close()
	l.mu.Lock()
	for _, c := range l.conns {
		c.Close()
	}
	l.conns = nil
	l.mu.Unlock()
	l.wg.Wait()
}

// SentinelGroup is a master, replicas that replicate through a
// ReplicationLink each, and three sentinels with quorum 2.
type SentinelGroup struct {
	Name      string
	Master    *RedisProc
	Replicas  []*RedisProc
	Links     []*ReplicationLink
	Sentinels []*RedisProc
}

// StartSentinelGroup starts the group and waits until every sentinel knows
// the other two and every replica is in sync, so that a failover can be
// authorised as soon as the master dies.
func StartSentinelGroup(t testing.TB, replicas int) *SentinelGroup {
	t.Helper()
	g := &SentinelGroup{Name: "seckill", Master: StartRedisArgs(t)}
	for range replicas {
		link := StartReplicationLink(t, g.Master.Addr)
		host, port, _ := net.SplitHostPort(link.Addr)
		g.Links = append(g.Links, link)
		g.Replicas = append(g.Replicas, StartRedisArgs(t, "--replicaof", host, port))
	}
	for range 3 {
		g.Sentinels = append(g.Sentinels, StartSentinel(t, g.Name, g.Master.Addr))
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
		for _, r := range reps {
			if r["flags"] != "slave" || r["master-link-status"] != "ok" {
				return false
			}
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

// WaitForMaster polls the sentinels until all of them name a master other
// than old, and returns it. It fails the test after timeout.
func (g *SentinelGroup) WaitForMaster(t testing.TB, old string, timeout time.Duration) string {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(timeout)
	for {
		var named []string
		for _, s := range g.Sentinels {
			if !s.alive() {
				continue
			}
			c := redis.NewSentinelClient(&redis.Options{Addr: s.Addr, MaxRetries: -1})
			hp, err := c.GetMasterAddrByName(ctx, g.Name).Result()
			c.Close()
			if err == nil && len(hp) == 2 {
				named = append(named, net.JoinHostPort(hp[0], hp[1]))
			}
		}
		if len(named) > 0 && !slices.Contains(named, old) && !slices.ContainsFunc(named, func(a string) bool { return a != named[0] }) {
			// The sentinels switch their config once the promoted replica
			// reports role master; make sure it accepts writes.
			c := redis.NewClient(&redis.Options{Addr: named[0], MaxRetries: -1})
			role, err := c.Do(ctx, "ROLE").Slice()
			c.Close()
			if err == nil && len(role) > 0 && role[0] == "master" {
				return named[0]
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no failover from %s within %v: sentinels name %v (logs in %s)", old, timeout, named, g.Sentinels[0].Dir)
		}
		time.Sleep(50 * time.Millisecond) // polling for an event of another process, bounded above
	}
}

// Cluster is a Redis Cluster of private redis-servers.
type Cluster struct {
	Nodes []*RedisProc
}

// StartCluster starts masters*(1+replicas) nodes with cluster mode on, joins
// them with redis-cli --cluster create (slots spread evenly over the
// masters) and waits until every node reports cluster_state:ok.
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
		if !n.alive() {
			continue
		}
		rc := redis.NewClient(&redis.Options{Addr: n.Addr, MaxRetries: -1})
		info, err := rc.ClusterInfo(ctx).Result()
		repl, err2 := rc.Info(ctx, "replication").Result()
		rc.Close()
		if err != nil || err2 != nil || !strings.Contains(info, "cluster_state:ok") {
			return false
		}
		if strings.Contains(repl, "role:slave") && !strings.Contains(repl, "master_link_status:up") {
			return false // a replica still syncing cannot acknowledge a WAIT
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

// Node returns the cluster's node at addr, nil if none.
func (c *Cluster) Node(addr string) *RedisProc {
	for _, n := range c.Nodes {
		if n.Addr == addr {
			return n
		}
	}
	return nil
}

// WaitForSlotMaster polls the live nodes until one of them maps key's slot
// to a master other than old that answers ROLE as a master and the cluster
// is ok again, and returns that master. It fails the test after timeout.
func (c *Cluster) WaitForSlotMaster(t testing.TB, key, old string, timeout time.Duration) string {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(timeout)
	for {
		if addr := c.slotMaster(ctx, key); addr != "" && addr != old && c.ok(ctx) {
			return addr
		}
		if time.Now().After(deadline) {
			t.Fatalf("no new master for %q within %v (logs in %s)", key, timeout, c.Nodes[0].Dir)
		}
		time.Sleep(50 * time.Millisecond) // polling for an event of other processes, bounded above
	}
}

// slotMaster is the master a live node names for key's slot, once that
// node answers ROLE as a master; "" if none does yet.
func (c *Cluster) slotMaster(ctx context.Context, key string) string {
	for _, n := range c.Nodes {
		if !n.alive() {
			continue
		}
		rc := redis.NewClient(&redis.Options{Addr: n.Addr, MaxRetries: -1})
		slot, err := rc.ClusterKeySlot(ctx, key).Result()
		var shards []redis.ClusterShard
		if err == nil {
			shards, err = rc.ClusterShards(ctx).Result()
		}
		rc.Close()
		if err != nil {
			continue
		}
		for _, sh := range shards {
			if !slices.ContainsFunc(sh.Slots, func(r redis.SlotRange) bool { return r.Start <= slot && slot <= r.End }) {
				continue
			}
			for _, node := range sh.Nodes {
				if node.Role != "master" || node.Health != "online" {
					continue
				}
				addr := net.JoinHostPort(node.IP, strconv.FormatInt(node.Port, 10))
				m := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
				role, err := m.Do(ctx, "ROLE").Slice()
				m.Close()
				if err == nil && len(role) > 0 && role[0] == "master" {
					return addr
				}
			}
		}
		return ""
	}
	return ""
}
