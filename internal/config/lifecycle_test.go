package config

import (
	"strings"
	"testing"
	"time"
)

func TestLifecycleSettings(t *testing.T) {
	d := Default()
	if d.Order.PaymentTimeout != 15*time.Minute || d.Order.SweepInterval != time.Second || d.Order.SweepBatch != 256 || d.Auth.PaymentTokens != "" {
		t.Errorf("defaults = %v, %v, %d, %q; want 15m, 1s, 256, none", d.Order.PaymentTimeout, d.Order.SweepInterval, d.Order.SweepBatch, d.Auth.PaymentTokens)
	}
	cases := []struct {
		name    string
		env     map[string]string
		wantErr string // "" : valid
		check   func(Config) bool
	}{
		{"env sets them", map[string]string{"SECKILL_ORDER_PAYMENT_TIMEOUT": "3s", "SECKILL_ORDER_SWEEP_INTERVAL": "250ms", "SECKILL_ORDER_SWEEP_BATCH": "10", "SECKILL_AUTH_PAYMENT_TOKENS": "payment-token-0123456789"}, "",
			func(c Config) bool {
				return c.Order.PaymentTimeout == 3*time.Second && c.Order.SweepInterval == 250*time.Millisecond && c.Order.SweepBatch == 10 && c.Auth.PaymentTokens == "payment-token-0123456789"
			}},
		{"0 pays at creation", map[string]string{"SECKILL_ORDER_PAYMENT_TIMEOUT": "0"}, "", func(c Config) bool { return c.Order.PaymentTimeout == 0 }},
		{"negative timeout", map[string]string{"SECKILL_ORDER_PAYMENT_TIMEOUT": "-1s"}, "order.payment_timeout", nil},
		{"not a duration", map[string]string{"SECKILL_ORDER_SWEEP_INTERVAL": "soon"}, "SECKILL_ORDER_SWEEP_INTERVAL", nil},
		{"zero interval", map[string]string{"SECKILL_ORDER_SWEEP_INTERVAL": "0s"}, "order.sweep_interval", nil},
		// A sweeper looping every nanosecond is a busy loop on the database.
		{"interval below its floor", map[string]string{"SECKILL_ORDER_SWEEP_INTERVAL": "1ns"}, "order.sweep_interval", nil},
		// Deadlines too short for any transaction sell nothing: refused, not accepted and useless.
		{"request timeout below its floor", map[string]string{"SECKILL_ORDER_REQUEST_TIMEOUT": "9ms"}, "order.request_timeout", nil},
		{"tx timeout below its floor", map[string]string{"SECKILL_ORDER_TX_TIMEOUT": "1ns"}, "order.tx_timeout", nil},
		{"batch too large", map[string]string{"SECKILL_ORDER_SWEEP_BATCH": "10001"}, "order.sweep_batch", nil},
		{"short payment token", map[string]string{"SECKILL_AUTH_PAYMENT_TOKENS": "payment-token-0123456789,short"}, "auth.payment_tokens", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Load("", func(k string) string { return tc.env[k] })
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("Load = %v; want valid", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("Load = %v; want an error naming %s", err, tc.wantErr)
			case tc.check != nil && !tc.check(cfg):
				t.Errorf("Load = %+v; not what the environment said", cfg.Order)
			}
		})
	}
}
