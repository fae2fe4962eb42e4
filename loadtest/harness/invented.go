package harness

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// usage is what an instance holds: its RSS (bytes) and goroutines.
type usage struct{ rss, goroutines int64 }

// usage reads instance i's from its /metrics.
func (r *run) usage(ctx context.Context, i int) (u usage, err error) {
	if u.rss, err = r.gauge(ctx, i, "process_resident_memory_bytes"); err == nil {
		u.goroutines, err = r.gauge(ctx, i, "go_goroutines")
	}
	return u, err
}

func mb(b int64) float64 { return float64(b) / (1 << 20) }

const (
	maxRSSGrowth = 100 << 20 // per instance
	// poolGoroutines is what an instance's MySQL pool may add: one per
	// connection, up to mysql.max_open_conns. Nothing per id.
	poolGoroutines      = 64
	inventedConcurrency = 64 // orders in flight at once
)

// RunInvented starts the database, a private Redis and cfg's instances,
// sends requests (default 20,000) orders for SKU ids that do not exist
// (loadtest/invented.js) and measures what stayed.
func RunInvented(ctx context.Context, cfg Config, requests int) (res ScenarioResult, err error) {
	orDefault(&requests, 20000)
	r, err := scenario{name: "invented"}.start(ctx, cfg)
	defer r.stop()
	if err != nil {
		return res, err
	}
	// Warm up: what is allocated once (pools, buffers) is not per id.
	const firstID, warmUp = int64(1) << 40, 2000
	if _, err := r.invent(ctx, "warm-up", firstID, warmUp); err != nil {
		return res, err
	}
	before := make([]usage, len(r.instances))
	for i := range before {
		if before[i], err = r.usage(ctx, i); err != nil {
			return res, err
		}
	}
	keysBefore, err := skuKeys(ctx, r.redisAddrs[0])
	if err != nil {
		return res, err
	}
	ks, err := r.invent(ctx, "k6", firstID+warmUp, requests)
	if err != nil {
		return res, err
	}
	sent, missed := int(ks.Metrics["http_reqs"].Count), int(ks.Metrics["not_found_missed"].Count)
	res.line("invented SKU ids: %d orders sent, %d answered other than 404 sku_not_found", sent, missed)
	if sent != requests || missed > 0 {
		res.bad("%d of %d orders answered 404 sku_not_found (%d sent)", sent-missed, requests, sent)
	}
	for i := range before {
		if err := r.usageAfter(ctx, i, before[i], &res); err != nil {
			return res, err
		}
	}
	keysAfter, err := skuKeys(ctx, r.redisAddrs[0])
	if err != nil {
		return res, err
	}
	res.line("  redis keys of SKUs: %d → %d", keysBefore, keysAfter)
	if keysAfter != keysBefore {
		res.bad("%d Redis keys of SKUs after the burst; %d before", keysAfter, keysBefore)
	}
	return res, nil
}

// invent runs invented.js: n orders for the ids first, first+1, ...
func (r *run) invent(ctx context.Context, name string, first int64, n int) (k6Summary, error) {
	k6res, err := r.runScript(ctx, "invented.js", name, scriptLimit, map[string]string{"BASE_URLS": strings.Join(r.baseURLs, ","),
		"FIRST": strconv.FormatInt(first, 10), "COUNT": strconv.Itoa(n), "VUS": strconv.Itoa(inventedConcurrency)},
		"SHOPPER_SECRET="+r.shopper)
	if err != nil {
		return k6Summary{}, err
	}
	return readK6Summary(k6res.Summary)
}

// usageAfter reads instance i's RSS and goroutines after the burst and
// checks their growth.
func (r *run) usageAfter(ctx context.Context, i int, before usage, res *ScenarioResult) error {
	// Goroutines of closed connections end shortly: wait, bounded.
	var after usage
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		var err error
		if after, err = r.usage(ctx, i); err != nil {
			return err
		}
		r.client.CloseIdleConnections()
		if after.goroutines <= before.goroutines+poolGoroutines || time.Now().After(deadline) {
			break
		}
	}
	grew := after.rss - before.rss
	res.line("  instance-%d: RSS %.1f → %.1f MB (%+.1f), goroutines %d → %d", i, mb(before.rss), mb(after.rss), mb(grew), before.goroutines, after.goroutines)
	if after.goroutines > before.goroutines+poolGoroutines {
		res.bad("instance-%d: %d goroutines after the burst; %d before (+%d for the MySQL pool allowed)",
			i, after.goroutines, before.goroutines, poolGoroutines)
	}
	if grew > maxRSSGrowth {
		res.bad("instance-%d: RSS grew %.1f MB; want < 100 MB", i, mb(grew))
	}
	return nil
}

// gauge reads one series of instance i's /metrics: go_goroutines,
// process_resident_memory_bytes.
func (r *run) gauge(ctx context.Context, i int, series string) (int64, error) {
	v, found, err := r.metric(ctx, i, series+" ")
	if err == nil && !found {
		err = fmt.Errorf("instance-%d /metrics: no %s", i, series)
	}
	return int64(v), err
}

// skuKeys counts a Redis server's keys of SKUs ("{sku:<id>}" in the name:
// a lock, its fence, its sold-out mark), which an invented id must not
// create; the sweeper's lease comes and goes on its own TTL.
func skuKeys(ctx context.Context, addr string) (int, error) {
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer rdb.Close()
	n := 0
	iter := rdb.Scan(ctx, 0, "*{sku:*", 1000).Iterator()
	for iter.Next(ctx) {
		n++
	}
	return n, iter.Err()
}
