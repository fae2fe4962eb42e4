package app_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/seckill/seckill/app"
	"github.com/seckill/seckill/internal/config"
	"github.com/seckill/seckill/internal/testenv"
)

// TestServe_ClosesWhatItOpened: once Serve returns, the database pool it
// opened is closed: no connection of its stays on the server (every
// instance a test ran used to leave its pool, its replicas' watch and its
// Redis clients open; a suite of many instances ran out of the server's
// connections).
func TestServe_ClosesWhatItOpened(t *testing.T) {
	t.Parallel()
	dsn := testenv.Database(t)
	db := testenv.DB(t, dsn)
	var name string
	if err := db.Raw("SELECT DATABASE()").Scan(&name).Error; err != nil {
		t.Fatal(err)
	}
	sqlDB, err := db.DB()
	if err != nil {
		t.Fatal(err)
	}
	sqlDB.SetMaxOpenConns(1)  // the test asks on one connection
	own := func() (n int64) { // connections to the test's database but the test's own
		if err := db.Raw("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE DB = ? AND ID <> CONNECTION_ID()", name).Scan(&n).Error; err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := own()
	cfg := config.Default()
	cfg.HTTP.Addr = "127.0.0.1:0"
	cfg.MySQL.DSN = dsn
	cfg.Redis.Addrs = []string{testenv.RedisAddr()}
	cfg.Admin.Token = token
	noShopperAuth(&cfg)
	cfg.Lock.Prefix = testenv.Name("closers") + ":"
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	addr := make(chan string, 1)
	go func() {
		var out bytes.Buffer
		done <- app.Serve(ctx, cfg, testenv.Logger(), &out, func(a string) { addr <- a })
	}()
	url := "http://" + <-addr
	createSKU(t, url)
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Serve = %v", err)
	}
	n := own()
	for i := 0; n > before && i < 50; i++ {
		time.Sleep(100 * time.Millisecond) // the server sees a closed socket at once; bounded all the same
		n = own()
	}
	if n > before {
		t.Errorf("%d connections of the stopped instance are still open on the server; want its pool closed", n-before)
	}
}
