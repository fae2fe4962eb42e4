package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/seckill/seckill/internal/app"
	"github.com/seckill/seckill/internal/config"
)

// mintToken prints a shopper token for -sub signed with auth.jwt.secret, with
// the configured issuer and audience: for tests and load tests against a
// service configured with the same secret.
func mintToken(args []string, cfg config.Config, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("seckill token", flag.ContinueOnError)
	fs.SetOutput(stderr)
	sub := fs.String("sub", "", "the shopper (the token's sub, the orders' user_id)")
	ttl := fs.Duration("ttl", time.Hour, "how long the token is valid")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *sub == "" || fs.NArg() != 0 {
		return errors.New("usage: seckill token -sub USER [-ttl 1h]")
	}
	if *ttl <= 0 {
		return errors.New("token: -ttl must be positive")
	}
	tok, err := app.ShopperToken(cfg.Auth.JWT, *sub, *ttl)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(stdout, tok)
	return err
}
