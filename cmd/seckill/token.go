package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/seckill/seckill/app"
	"github.com/seckill/seckill/internal/auth"
	"github.com/seckill/seckill/internal/config"
	"github.com/seckill/seckill/service"
)

const tokenUsage = `Usage: seckill token -sub USER [-ttl 1h]

Prints a shopper token (HS256) signed with auth.jwt.secret (SECKILL_AUTH_JWT_SECRET),
with the configured issuer and audience: for tests and load tests against a
service configured with the same secret.

  -sub USER   the shopper: the token's sub, the orders' user_id (1-64 bytes
              of UTF-8, no white space at either end, no control characters)
  -ttl 1h     how long the token is valid
`

type tokenArgs struct {
	sub string
	ttl time.Duration
}

// parseToken reads the token command's flags and checks them as the
// server will, so that it never mints a token the server refuses. It
// returns flag.ErrHelp for -h.
func parseToken(args []string) (tokenArgs, error) {
	fs := flag.NewFlagSet("seckill token", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var t tokenArgs
	fs.StringVar(&t.sub, "sub", "", "")
	fs.DurationVar(&t.ttl, "ttl", time.Hour, "")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return t, err
		}
		return t, fmt.Errorf("token: %w (see seckill token -h)", err)
	}
	switch {
	case t.sub == "" || fs.NArg() != 0:
		return t, errors.New("usage: seckill token -sub USER [-ttl 1h] (see seckill token -h)")
	case len(t.sub) > auth.MaxSubjectLen:
		return t, fmt.Errorf("token: -sub is %d bytes; the server accepts at most %d", len(t.sub), auth.MaxSubjectLen)
	case service.IDProblem(t.sub) != "": // the rule the server applies to the buyer
		return t, fmt.Errorf("token: -sub %q %s; the server refuses it", t.sub, service.IDProblem(t.sub))
	case t.ttl <= 0:
		return t, errors.New("token: -ttl must be positive")
	}
	return t, nil
}

// mintToken prints the shopper token t asks for under cfg's secret.
func mintToken(t tokenArgs, cfg config.Config, stdout io.Writer) error {
	tok, err := app.ShopperToken(cfg.Auth.JWT, t.sub, t.ttl)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(stdout, tok)
	return err
}
