package harness

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Topologies of the failover fault (Config.Redis).
const (
	RedisSentinel = "sentinel"
	RedisCluster  = "cluster"
)

// sentinelMaster is the master name the failover fault's sentinels monitor.
const sentinelMaster = "seckill"

// sentinelSetup is the failover fault's Redis: a master, two replicas and
// three sentinels (quorum 2), private redis-servers without persistence.
type sentinelSetup struct {
	master    string   // the address the run started the master on
	replicas  []string // the replicas' addresses
	sentinels []string // the sentinels' addresses
}

// startSentinels starts the master (r.redis[0]), two replicas and three
// sentinels, and waits until the sentinels know each other and both
// replicas are in sync, so the failover can be authorised once the master
// dies. The instances get the sentinels as SECKILL_REDIS_ADDRS.
func (r *run) startSentinels(ctx context.Context) error {
	p, master, err := startRedis(ctx, &r.ps, r.work, 0)
	if err != nil {
		return err
	}
	r.redis = append(r.redis, p)
	s := &sentinelSetup{master: master}
	host, port, _ := net.SplitHostPort(master)
	for i := 1; i <= 2; i++ {
		p, addr, err := startRedis(ctx, &r.ps, r.work, i, "--replicaof", host, port)
		if err != nil {
			return err
		}
		r.redis = append(r.redis, p)
		s.replicas = append(s.replicas, addr)
	}
	for i := range 3 {
		addr, err := startSentinel(ctx, &r.ps, r.work, i, master)
		if err != nil {
			return err
		}
		s.sentinels = append(s.sentinels, addr)
	}
	if err := poll(ctx, "sentinels", 60*time.Second, 100*time.Millisecond, s.settled); err != nil {
		return err
	}
	r.sentinels, r.redisAddrs = s, s.sentinels
	r.event("sentinel group ready: master %s, replicas %s, sentinels %s", master,
		strings.Join(s.replicas, " "), strings.Join(s.sentinels, " "))
	return nil
}

// startSentinel starts redis-server --sentinel i monitoring master. The
// master is declared down after 1s without an answer, a common production
// setting being 5–30s: the selling gap scales with it.
func startSentinel(ctx context.Context, ps *procs, dir string, i int, master string) (string, error) {
	port, err := FreePort()
	if err != nil {
		return "", err
	}
	host, mport, _ := net.SplitHostPort(master)
	sdir := filepath.Join(dir, fmt.Sprintf("sentinel-%d", i))
	if err := os.MkdirAll(sdir, 0o755); err != nil {
		return "", err
	}
	conf := strings.Join([]string{
		"port " + strconv.Itoa(port),
		"bind 127.0.0.1",
		"dir " + sdir,
		fmt.Sprintf("sentinel monitor %s %s %s 2", sentinelMaster, host, mport),
		fmt.Sprintf("sentinel down-after-milliseconds %s 1000", sentinelMaster),
		fmt.Sprintf("sentinel failover-timeout %s 10000", sentinelMaster),
		fmt.Sprintf("sentinel parallel-syncs %s 2", sentinelMaster),
	}, "\n") + "\n"
	file := filepath.Join(sdir, "sentinel.conf")
	if err := os.WriteFile(file, []byte(conf), 0o600); err != nil {
		return "", err
	}
	p := ps.add(&proc{
		name: fmt.Sprintf("redis-sentinel-%d", i), path: "redis-server",
		args: []string{file, "--sentinel"},
		log:  filepath.Join(dir, fmt.Sprintf("sentinel-%d.log", i)),
	})
	if err := p.start(); err != nil {
		return "", err
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	return addr, poll(ctx, "redis-sentinel", 15*time.Second, 50*time.Millisecond, dialTCP(addr))
}

// settled reports nil once every sentinel knows the two others and both
// replicas, with their links up.
func (s *sentinelSetup) settled(ctx context.Context) error {
	for _, a := range s.sentinels {
		c := redis.NewSentinelClient(&redis.Options{Addr: a, MaxRetries: -1})
		peers, err1 := c.Sentinels(ctx, sentinelMaster).Result()
		reps, err2 := c.Replicas(ctx, sentinelMaster).Result()
		c.Close()
		if err := errors.Join(err1, err2); err != nil {
			return err
		}
		if len(peers) != len(s.sentinels)-1 || len(reps) != len(s.replicas) {
			return fmt.Errorf("sentinel %s knows %d sentinels and %d replicas", a, len(peers), len(reps))
		}
		for _, r := range reps {
			if r["flags"] != "slave" || r["master-link-status"] != "ok" {
				return fmt.Errorf("sentinel %s: replica %s:%s flags %s link %s", a, r["ip"], r["port"], r["flags"], r["master-link-status"])
			}
		}
	}
	return nil
}

// promoted reports nil once every sentinel names a master other than the
// original one and that node answers as a master.
func (s *sentinelSetup) promoted(ctx context.Context) error {
	var named string
	for _, a := range s.sentinels {
		c := redis.NewSentinelClient(&redis.Options{Addr: a, MaxRetries: -1})
		hp, err := c.GetMasterAddrByName(ctx, sentinelMaster).Result()
		c.Close()
		if err != nil || len(hp) != 2 {
			return fmt.Errorf("sentinel %s: %v", a, err)
		}
		addr := net.JoinHostPort(hp[0], hp[1])
		if addr == s.master || (named != "" && addr != named) {
			return fmt.Errorf("sentinels name %s and %s", named, addr)
		}
		named = addr
	}
	c := redis.NewClient(&redis.Options{Addr: named, MaxRetries: -1})
	defer c.Close()
	role, err := c.Do(ctx, "ROLE").Slice()
	if err != nil || len(role) == 0 || role[0] != "master" {
		return fmt.Errorf("%s: role %v, %v", named, role, err)
	}
	return nil
}

// failover SIGKILLs the master and waits until Sentinel has promoted a
// replica. The old master stays down: the sale goes on without it.
func (r *run) failover(ctx context.Context) error {
	if r.cluster != nil {
		return r.clusterFailover(ctx)
	}
	m := &r.monitor
	master := r.redis[0]
	m.victims = master.name + " (Sentinel master)"
	m.faultStart = time.Now()
	r.event("FAULT: SIGKILL the master %s (sold %d of %d)", r.sentinels.master, m.faultSold, r.cfg.Stock)
	if err := master.kill(); err != nil {
		return err
	}
	if err := poll(ctx, "Sentinel failover", 90*time.Second, 50*time.Millisecond, r.sentinels.promoted); err != nil {
		return err
	}
	m.faultBack = time.Now()
	r.event("FAULT: a replica promoted %.1fs after the master died", m.faultBack.Sub(m.faultStart).Seconds())
	return nil
}
