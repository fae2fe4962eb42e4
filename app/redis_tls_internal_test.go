package app

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill/engine"
	"github.com/seckill/seckill/internal/config"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/lock"
	"github.com/seckill/seckill/locking"
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
		ok    bool
		check func(error) bool
		want  string
	}{
		{"right CA, user and password", func(*config.Config) {}, true, nil, "a lease"},
		{"wrong CA", func(c *config.Config) { c.Redis.TLS.CAFile = otherCA }, false,
			func(err error) bool {
				var verr *tls.CertificateVerificationError
				return errors.As(err, &verr) && strings.Contains(err.Error(), "certificate signed by unknown authority")
			}, "a certificate verification error naming the unknown authority"},
		{"wrong password", func(c *config.Config) { c.Redis.Password = "wrong" }, false,
			func(err error) bool { return err != nil && strings.HasPrefix(err.Error(), "WRONGPASS") }, "WRONGPASS"},
		{"no TLS to a TLS port", func(c *config.Config) { c.Redis.TLS = config.RedisTLS{} }, false,
			func(err error) bool { return err != nil }, "an error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := base()
			tt.edit(&cfg)
			rs := openTestRedis(t, cfg)
			locker := locking.NewRedisLocker(rs.lockClient(lock.WithPrefix(testenv.Name("test:tls:") + ":")))
			var err error
			if tt.ok {
				// The right settings: a TLS handshake on a loaded machine
				// may outlast the 200ms dial timeout now and then, so wait
				// for a PING and a lease, bounded.
				deadline := time.Now().Add(10 * time.Second)
				for {
					var l engine.Lease
					if err = rs.clients[0].Ping(ctx).Err(); err == nil {
						if l, err = locker.Obtain(ctx, "sku:1", 0); err == nil {
							if err := l.Release(ctx); err != nil {
								t.Fatal(err)
							}
							return
						}
					}
					if time.Now().After(deadline) {
						t.Fatalf("right CA, user and password: %v; want a PING and a lease within 10s", err)
					}
					time.Sleep(20 * time.Millisecond) // polling, bounded above
				}
			}
			err = untilAnswered(func() error { return rs.clients[0].Ping(ctx).Err() })
			if !tt.check(err) {
				t.Fatalf("PING = %v; want %s", err, tt.want)
			}
			lerr := untilAnswered(func() error { _, err := locker.Obtain(ctx, "sku:1", 0); return err })
			if !errors.Is(lerr, service.ErrLockUnavailable) || !strings.Contains(lerr.Error(), err.Error()) {
				t.Errorf("Obtain = %v; want lock unavailable, with the cause %q", lerr, err)
			}
			t.Logf("%s: %v", tt.name, lerr)
		})
	}
}

// untilAnswered calls f until its error is not a timeout (a handshake or a
// dial outlasting the 200ms default on a loaded machine), for at most 10s,
// and returns the last error.
func untilAnswered(f func() error) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := f()
		var ne net.Error
		timedOut := errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
		if !timedOut || time.Now().After(deadline) {
			return err
		}
		time.Sleep(20 * time.Millisecond) // polling, bounded above
	}
}
