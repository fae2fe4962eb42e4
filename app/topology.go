package app

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/config"
	"github.com/seckill/seckill/lock"
)

// redisSetup is the Redis the service runs on, as redis.mode says: one
// client (standalone, Sentinel-managed master, or Cluster) or one per
// Redlock master. go-redis follows failovers.
type redisSetup struct {
	mode    string
	clients []redis.UniversalClient
	watch   *sentinelWatch // nil unless mode is sentinel
}

// newRedisSetup builds the clients for addrs (cfg.Redis.Addrs, or the embedded
// Redis of the quick start). Passwords go to go-redis only, never to a log.
func newRedisSetup(cfg config.Config, addrs []string) (*redisSetup, error) {
	r := cfg.Redis
	tlsCfg, err := redisTLS(r.TLS)
	if err != nil {
		return nil, err
	}
	// One set of options for every mode; each client takes its part.
	opts := redis.UniversalOptions{
		Addrs:            addrs,
		MasterName:       r.MasterName,
		SentinelUsername: r.SentinelUsername,
		SentinelPassword: r.SentinelPassword,
		Username:         r.Username,
		Password:         r.Password,
		DB:               r.DB,
		DialTimeout:      r.DialTimeout,
		ReadTimeout:      r.IOTimeout,
		WriteTimeout:     r.IOTimeout,
		PoolSize:         r.PoolSize,
		TLSConfig:        tlsCfg,
		// The lock retries on its own terms. Fail fast when Redis is down:
		// the order path then sells on the database's guard instead of
		// waiting out dial retries.
		MaxRetries:         -1,
		DialerRetries:      1,
		DialerRetryTimeout: time.Millisecond,
	}
	s := &redisSetup{mode: cfg.RedisMode()}
	switch s.mode {
	case config.RedisSentinel:
		s.clients = []redis.UniversalClient{redis.NewFailoverClient(opts.Failover())}
		s.watch = newSentinelWatch(r, addrs, tlsCfg)
	case config.RedisCluster:
		s.clients = []redis.UniversalClient{newClusterClient(opts.Cluster())}
	default: // standalone: one address; redlock: one client per master
		for _, a := range addrs {
			one := opts
			one.Addrs = []string{a}
			s.clients = append(s.clients, redis.NewClient(one.Simple()))
		}
	}
	return s, nil
}

// redisTLS returns the TLS config of redis.tls, nil when it is off. With no
// server name, go-redis verifies each address's own host name.
func redisTLS(t config.RedisTLS) (*tls.Config, error) {
	if !t.Enabled {
		return nil, nil
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName}
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("config: redis.tls.ca_file: %w", err)
		}
		c.RootCAs = x509.NewCertPool()
		if !c.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("config: redis.tls.ca_file %s: no PEM certificate in it", t.CAFile)
		}
	}
	return c, nil
}

// lockClient returns a lock.Client over the setup: fenced on one Redis
// (standalone, Sentinel or Cluster), Redlock over independent masters.
func (s *redisSetup) lockClient(opts ...lock.Option) *lock.Client {
	if s.mode == config.RedisRedlock {
		return lock.NewRedlock(s.clients, opts...)
	}
	return lock.New(s.clients[0], opts...)
}

// marks returns the client that keeps the shared sold-out marks: a cache,
// so with Redlock they live on the first master.
func (s *redisSetup) marks() redis.UniversalClient { return s.clients[0] }

// describe names the setup for the start-up log.
func (s *redisSetup) describe() string {
	if s.mode == config.RedisRedlock {
		return fmt.Sprintf("redlock(%d)", len(s.clients))
	}
	return s.mode
}

func (s *redisSetup) Close() error {
	var errs []error
	for _, c := range s.clients {
		errs = append(errs, c.Close())
	}
	if s.watch != nil {
		errs = append(errs, s.watch.Close())
	}
	return errors.Join(errs...)
}

// lockReplicaOptions turns lock.min_replicas into a lock option.
func lockReplicaOptions(cfg config.Config) []lock.Option {
	if cfg.Lock.MinReplicas == 0 {
		return nil
	}
	return []lock.Option{lock.WithMinReplicas(cfg.Lock.MinReplicas, cfg.Lock.ReplicaTimeout)}
}

// sentinelWatch asks the sentinels which node is master and counts the
// changes, at every /readyz and /metrics scrape; two failovers between
// probes that end on the same master go unseen.
type sentinelWatch struct {
	name      string
	sentinels []*redis.SentinelClient

	mu        sync.Mutex
	master    string
	failovers atomic.Int64
}

func newSentinelWatch(r config.Redis, addrs []string, tlsCfg *tls.Config) *sentinelWatch {
	w := &sentinelWatch{name: r.MasterName}
	for _, a := range addrs {
		w.sentinels = append(w.sentinels, redis.NewSentinelClient(&redis.Options{
			Addr:         a,
			Username:     r.SentinelUsername,
			Password:     r.SentinelPassword,
			DialTimeout:  r.DialTimeout,
			ReadTimeout:  r.IOTimeout,
			WriteTimeout: r.IOTimeout,
			PoolSize:     1,
			MaxRetries:   -1,
			TLSConfig:    tlsCfg,
		}))
	}
	return w
}

// Master returns the master's address as the first sentinel that answers
// names it, and the number of master changes seen so far.
func (w *sentinelWatch) Master(ctx context.Context) (string, int64, error) {
	var errs []error
	for _, s := range w.sentinels {
		hp, err := s.GetMasterAddrByName(ctx, w.name).Result()
		if err != nil || len(hp) != 2 {
			errs = append(errs, err)
			continue
		}
		addr := hp[0] + ":" + hp[1]
		w.mu.Lock()
		if w.master != "" && w.master != addr {
			w.failovers.Add(1)
		}
		w.master = addr
		w.mu.Unlock()
		return addr, w.failovers.Load(), nil
	}
	return "", w.failovers.Load(), fmt.Errorf("sentinel: no sentinel names master %q: %w", w.name, errors.Join(errs...))
}

func (w *sentinelWatch) Close() error {
	var errs []error
	for _, s := range w.sentinels {
		errs = append(errs, s.Close())
	}
	return errors.Join(errs...)
}

// topologyCollector publishes seckill_redis_topology{mode,master} = 1 and
// seckill_redis_failovers_seen_total on every scrape.
type topologyCollector struct {
	s         *redisSetup
	topology  *prometheus.Desc
	failovers *prometheus.Desc
}

func newTopologyCollector(s *redisSetup) *topologyCollector {
	return &topologyCollector{
		s: s,
		topology: prometheus.NewDesc("seckill_redis_topology",
			"The Redis setup (redis.mode) and, with Sentinel, the master the sentinels name (empty when none answers).",
			[]string{"mode", "master"}, nil),
		failovers: prometheus.NewDesc("seckill_redis_failovers_seen_total",
			"Sentinel master changes this instance has seen (checked at every scrape and /readyz).", nil, nil),
	}
}

func (c *topologyCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.topology
	ch <- c.failovers
}

func (c *topologyCollector) Collect(ch chan<- prometheus.Metric) {
	var master string
	var failovers int64
	if c.s.watch != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		master, failovers, _ = c.s.watch.Master(ctx) // no master: an empty label says so
		cancel()
	}
	ch <- prometheus.MustNewConstMetric(c.topology, prometheus.GaugeValue, 1, c.s.mode, master)
	ch <- prometheus.MustNewConstMetric(c.failovers, prometheus.CounterValue, float64(failovers))
}

// RedisLogger sends go-redis's own messages (a failed dial, a pool
// problem) to log instead of stderr. go-redis has one logger per process:
// main sets it once.
func RedisLogger(log *slog.Logger) interface {
	Printf(ctx context.Context, format string, v ...any)
} {
	return redisLogger{log}
}

type redisLogger struct{ log *slog.Logger }

func (l redisLogger) Printf(ctx context.Context, format string, v ...any) {
	l.log.WarnContext(ctx, "redis client", "detail", fmt.Sprintf(format, v...))
}
