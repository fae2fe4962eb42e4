package config

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The order lifecycle's settings: order.payment_timeout,
// order.sweep_interval, order.sweep_batch and auth.payment_tokens.

// Lifecycle defaults.
const (
	DefaultPaymentTimeout = 15 * time.Minute
	DefaultSweepInterval  = time.Second
	DefaultSweepBatch     = 256
)

func (c *Config) applyLifecycleEnv(getenv func(string) string) error {
	if v := getenv("SECKILL_AUTH_PAYMENT_TOKENS"); v != "" {
		c.Auth.PaymentTokens = v
	}
	for key, dst := range map[string]*time.Duration{
		"SECKILL_ORDER_PAYMENT_TIMEOUT": &c.Order.PaymentTimeout,
		"SECKILL_ORDER_SWEEP_INTERVAL":  &c.Order.SweepInterval,
	} {
		if v := getenv(key); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil {
				return fmt.Errorf("config: %s=%q: not a duration", key, v)
			}
			*dst = d
		}
	}
	if v := getenv("SECKILL_ORDER_SWEEP_BATCH"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("config: SECKILL_ORDER_SWEEP_BATCH=%q: not an integer", v)
		}
		c.Order.SweepBatch = n
	}
	return nil
}

func (c Config) validateLifecycle() error {
	switch {
	case c.Order.PaymentTimeout < 0:
		return errors.New("config: order.payment_timeout must not be negative (0: orders are paid at creation)")
	case c.Order.SweepInterval <= 0:
		return errors.New("config: order.sweep_interval must be positive")
	case c.Order.SweepBatch < 1 || c.Order.SweepBatch > 10000:
		return errors.New("config: order.sweep_batch must be between 1 and 10000")
	}
	for _, t := range strings.Split(c.Auth.PaymentTokens, ",") {
		if c.Auth.PaymentTokens != "" && len(strings.TrimSpace(t)) < 16 {
			return errors.New("config: auth.payment_tokens must be at least 16 characters each (comma-separated)")
		}
	}
	return nil
}
