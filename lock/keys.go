package lock

import (
	"context"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// HeldKeys returns up to limit keys matching the glob match (without the
// prefix) that have a lease on any master now. It SCANs, blocking nothing,
// so a key taken or released meanwhile may or may not be listed.
func (c *Client) HeldKeys(ctx context.Context, match string, limit int) ([]string, error) {
	var (
		mu   sync.Mutex
		seen = map[string]bool{}
		keys []string
	)
	scan := func(ctx context.Context, rdb redis.UniversalClient) error {
		var cursor uint64
		for {
			batch, next, err := rdb.Scan(ctx, cursor, c.opts.prefix+match, 1000).Result()
			if err != nil {
				return redisErr("scan", err)
			}
			mu.Lock()
			for _, k := range batch {
				k = strings.TrimPrefix(k, c.opts.prefix)
				if strings.HasSuffix(k, fenceSuffix) || strings.HasSuffix(k, wantedSuffix) || strings.HasSuffix(k, rankSuffix) || strings.HasSuffix(k, rankExpSuffix) || seen[k] || len(keys) >= limit {
					continue
				}
				seen[k] = true
				keys = append(keys, k)
			}
			full := len(keys) >= limit
			mu.Unlock()
			if cursor = next; cursor == 0 || full {
				return nil
			}
		}
	}
	for _, rdb := range c.be.stores() {
		var err error
		if cc, ok := rdb.(*redis.ClusterClient); ok {
			err = cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error { return scan(ctx, m) })
		} else {
			err = scan(ctx, rdb)
		}
		if err != nil {
			return nil, err
		}
	}
	return keys, nil
}

func (s *single) stores() []redis.UniversalClient  { return []redis.UniversalClient{s.rdb} }
func (r *redlock) stores() []redis.UniversalClient { return r.rdbs }
