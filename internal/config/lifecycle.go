package config

import (
	"errors"
	"strings"
)

// The order lifecycle's settings: order.payment_timeout,
// order.sweep_interval, order.sweep_batch and auth.payment_tokens.

// DefaultPaymentTimeout is the default of order.payment_timeout.
var DefaultPaymentTimeout = Default().Order.PaymentTimeout

func (c Config) validateLifecycle() error {
	for _, t := range strings.Split(c.Auth.PaymentTokens, ",") {
		if c.Auth.PaymentTokens != "" && len(strings.TrimSpace(t)) < 16 {
			return errors.New("config: auth.payment_tokens must be at least 16 characters each (comma-separated)")
		}
	}
	return nil
}
