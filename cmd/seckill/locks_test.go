package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strconv"
	"strings"
	"testing"

	"github.com/seckill/seckill/handler"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/lock"
)

// TestLocksCommand: `seckill locks` lists, from serve's config, exactly the
// SKU locks that have a holder (not a free one, not another key under the
// prefix), each with its holder and fence.
func TestLocksCommand(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	ctx := context.Background()
	c := lock.New(rdb, lock.WithPrefix(prefix), lock.WithOwner("instance-a"))
	var fences []int64
	for _, id := range []int64{7, 42} {
		l, err := c.Obtain(ctx, "{sku:"+strconv.FormatInt(id, 10)+"}")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Release(ctx)
		fences = append(fences, l.Fence())
	}
	free, err := c.Obtain(ctx, "{sku:9}") // leaves a fence counter, no lease
	if err != nil {
		t.Fatal(err)
	}
	if err := free.Release(ctx); err != nil {
		t.Fatal(err)
	}
	other, err := c.Obtain(ctx, "{report:1}")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Release(ctx)

	vars := map[string]string{"SECKILL_REDIS_ADDRS": testenv.RedisAddr(), "SECKILL_LOCK_PREFIX": prefix}
	var stdout, stderr bytes.Buffer
	if err := run(ctx, []string{"locks", "-json"}, env(vars), &stdout, &stderr); err != nil {
		t.Fatalf("seckill locks -json: %v\n%s", err, stderr.String())
	}
	var got []handler.LockJSON
	if err := json.Unmarshal(stdout.Bytes(), &got); err != nil {
		t.Fatalf("%v: %s", err, stdout.String())
	}
	if len(got) != 2 {
		t.Fatalf("seckill locks -json = %s; want SKUs 7 and 42", stdout.String())
	}
	for i, id := range []int64{7, 42} {
		v := got[i]
		if v.SKUID != id || !v.Held || v.Owner != "instance-a" || v.Fence != strconv.FormatInt(fences[i], 10) || len(v.Token) != lock.TokenPrefixLen {
			t.Errorf("lock #%d = %+v; want SKU %d held by instance-a with fence %d", i, v, id, fences[i])
		}
	}

	stdout.Reset()
	if err := run(ctx, []string{"locks"}, env(vars), &stdout, &stderr); err != nil {
		t.Fatalf("seckill locks: %v\n%s", err, stderr.String())
	}
	if lines := strings.Split(strings.TrimSpace(stdout.String()), "\n"); len(lines) != 3 || !strings.HasPrefix(lines[1], "7 ") || !strings.HasPrefix(lines[2], "42 ") {
		t.Errorf("seckill locks printed:\n%s\nwant a header, then SKUs 7 and 42", stdout.String())
	}

	if err := run(ctx, []string{"locks"}, env(nil), io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), "redis.addrs") {
		t.Errorf("seckill locks without a lock store = %v; want an error naming redis.addrs", err)
	}
}
