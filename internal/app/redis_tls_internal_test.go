package app

import (
	"context"
	"crypto/tls"
	"errors"
	"strings"
	"testing"

	"github.com/seckill/seckill/internal/config"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/lock"
	"github.com/seckill/seckill/service"
)

// TestRedisTLS_RefusedClearly: against a real redis-server over TLS, a CA
// that did not sign the server's certificate, a wrong password and plain
// TCP each fail with an error that says which, and the lock reports Redis
// unavailable (the order path then sells on the database's guard); the
// right settings obtain a lock.
func TestRedisTLS_RefusedClearly(t *testing.T) {
	srv := testenv.StartRedisTLS(t)
	otherCA := testenv.NewTLSFiles(t).CA
	ctx := context.Background()
	base := func() config.Config {
		cfg := config.Default()
		cfg.Redis.Addrs = []string{srv.TLSAddr}
		cfg.Redis.Username, cfg.Redis.Password = srv.User, srv.Password
		cfg.Redis.TLS = config.RedisTLS{Enabled: true, CAFile: srv.Files.CA}
		return cfg
	}
	tests := []struct {
		name  string
		edit  func(*config.Config)
		check func(error) bool
		want  string
	}{
		{"right CA, user and password", func(*config.Config) {}, func(err error) bool { return err == nil }, "no error"},
		{"wrong CA", func(c *config.Config) { c.Redis.TLS.CAFile = otherCA },
			func(err error) bool {
				var verr *tls.CertificateVerificationError
				return errors.As(err, &verr) && strings.Contains(err.Error(), "certificate signed by unknown authority")
			}, "a certificate verification error naming the unknown authority"},
		{"wrong password", func(c *config.Config) { c.Redis.Password = "wrong" },
			func(err error) bool { return err != nil && strings.HasPrefix(err.Error(), "WRONGPASS") }, "WRONGPASS"},
		{"no TLS to a TLS port", func(c *config.Config) { c.Redis.TLS = config.RedisTLS{} },
			func(err error) bool { return err != nil }, "an error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := base()
			tt.edit(&cfg)
			rs := openTestRedis(t, cfg)
			err := rs.clients[0].Ping(ctx).Err()
			if !tt.check(err) {
				t.Fatalf("PING = %v; want %s", err, tt.want)
			}
			locker := NewLocker(rs.lockClient(lock.WithPrefix(testenv.Name("test:tls:") + ":")))
			l, lerr := locker.Obtain(ctx, "sku:1")
			if err == nil {
				if lerr != nil {
					t.Fatalf("Obtain = %v; want a lease", lerr)
				}
				if err := l.Release(ctx); err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(lerr, service.ErrLockUnavailable) || !strings.Contains(lerr.Error(), err.Error()) {
				t.Errorf("Obtain = %v; want lock unavailable, with the cause %q", lerr, err)
			}
			t.Logf("%s: %v", tt.name, lerr)
		})
	}
}
