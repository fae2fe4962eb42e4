package main

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seckill/seckill/internal/auth"
	"github.com/seckill/seckill/lock/locktest"
)

// questions is the server's statement counter (all sessions).
func questions(ctx context.Context, db *sql.DB) (int64, error) {
	var name string
	var v int64
	err := db.QueryRowContext(ctx, "SHOW GLOBAL STATUS LIKE 'Questions'").Scan(&name, &v)
	return v, err
}

// versions sums the SKUs' versions: one per committed batch (or restock).
func versions(ctx context.Context, db *sql.DB) (int64, error) {
	var v sql.NullInt64
	err := db.QueryRowContext(ctx, "SELECT SUM(version) FROM skus").Scan(&v)
	return v.Int64, err
}

// unpublished counts the order events not yet published (a row of the
// outbox is a run of orders' events; none without events.enabled).
func unpublished(ctx context.Context, db *sql.DB) (int64, error) {
	var n int64
	err := db.QueryRowContext(ctx, "SELECT COALESCE(SUM((last_order_id - order_id) DIV step + 1), 0) FROM order_events WHERE published_at IS NULL").Scan(&n)
	return n, err
}

func peakRSS(pid int) float64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			return kb / 1024
		}
	}
	return 0
}

func createSKU(ctx context.Context, base string, stock int64) (int64, error) {
	body := fmt.Sprintf(`{"name":"bench","stock":%d,"per_user_limit":1}`, stock)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/admin/v1/skus", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var out struct{ ID int64 }
	if resp.StatusCode != http.StatusCreated {
		return 0, fmt.Errorf("create sku: %s", resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return 0, err
	}
	return out.ID, nil
}

func buyOnce(ctx context.Context, base string, sku int64) error {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/api/v1/orders",
		strings.NewReader(fmt.Sprintf(`{"sku_id":%d,"user_id":"first","quantity":1}`, sku)))
	tok, err := auth.Mint([]byte(shopperSecret), auth.Claims{Subject: "first", Audience: "seckill", TTL: time.Hour}, time.Now())
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		return fmt.Errorf("buying the last unit: %s", resp.Status)
	}
	return nil
}

func waitReady(ctx context.Context, base string) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("service at %s not ready within 30s", base)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

type redisServer struct {
	*locktest.RedisProc
	rdb *redis.Client
}

// startRedis starts a private redis-server, so that its command counter
// counts this benchmark's commands only.
func startRedis(ctx context.Context, dir string) (*redisServer, error) {
	p, err := locktest.StartRedis(ctx, dir)
	if err != nil {
		return nil, fmt.Errorf("redis-server: %w", err)
	}
	return &redisServer{p, redis.NewClient(&redis.Options{Addr: p.Addr})}, nil
}

// commands is Redis's total_commands_processed (the INFO itself included).
func (s *redisServer) commands(ctx context.Context) (int64, error) {
	info, err := s.rdb.Info(ctx, "stats").Result()
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "total_commands_processed:"); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, errors.New("redis INFO has no total_commands_processed")
}

func (s *redisServer) stop() {
	s.rdb.Close()
	s.Kill()
}
