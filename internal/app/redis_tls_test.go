package app_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/config"
	"github.com/seckill/seckill/internal/testenv"
)

// TestRedisTLS_TwoInstancesSellThroughAnACLUser: two instances whose Redis
// is a real redis-server reached over TLS only (a throwaway CA), logged in
// as an ACL user with a password (the default user is off), sell exactly
// the stock, and they did so under the lock: the SKU's fence counter is on
// that server, and /readyz says Redis is up.
func TestRedisTLS_TwoInstancesSellThroughAnACLUser(t *testing.T) {
	srv := testenv.StartRedisTLS(t)
	dsn := testenv.Database(t)
	prefix := testenv.Name("test:tls:") + ":"
	tlsInstance := func() string {
		cfg := config.Default()
		cfg.HTTP.Addr = "127.0.0.1:0"
		cfg.MySQL.DSN = dsn
		cfg.MySQL.MaxOpenConns, cfg.MySQL.MaxIdleConns = 16, 16
		cfg.Redis.Addrs = []string{srv.TLSAddr}
		cfg.Redis.Username, cfg.Redis.Password = srv.User, srv.Password
		cfg.Redis.TLS = config.RedisTLS{Enabled: true, CAFile: srv.Files.CA}
		cfg.Admin.Token = token
		noShopperAuth(&cfg)
		cfg.Lock.Prefix = prefix
		return "http://" + serveConfig(t, cfg)
	}
	urls := []string{tlsInstance(), tlsInstance()}
	for _, u := range urls {
		if status, ready := call(t, http.MethodGet, u+"/readyz", ""); status != http.StatusOK || ready["redis"] != "up" {
			t.Fatalf("/readyz over TLS = %d %v; want 200, redis up", status, ready)
		}
	}
	skuID := createSKU(t, urls[0])
	statuses := sale(t, urls, skuID, nil)
	checkStatuses(t, statuses, http.StatusCreated, http.StatusConflict, http.StatusServiceUnavailable)
	verify(t, urls[1], skuID)

	// A client of the test's own, as the service's user over TLS: the lock
	// wrote the SKU's fence counter there (the fallback path writes none).
	pem, err := os.ReadFile(srv.Files.CA)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	c := redis.NewClient(&redis.Options{Addr: srv.TLSAddr, Username: srv.User, Password: srv.Password,
		TLSConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}})
	defer c.Close()
	fence := fmt.Sprintf("%s{sku:%d}:fence", prefix, skuID)
	if n, err := c.Exists(context.Background(), fence).Result(); err != nil || n != 1 {
		t.Errorf("EXISTS %s over TLS = %d, %v; want 1: the sale did not go through the lock", fence, n, err)
	}
}
