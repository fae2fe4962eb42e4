package app

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/seckill/seckill/internal/config"
	"github.com/seckill/seckill/service"
)

// announce says where the service runs; in embedded mode it seeds the
// demo SKU and prints the quick start. A generated admin token, payment
// token or HS256 secret goes to stdout, never to the log.
func announce(ctx context.Context, cfg config.Config, catalog *service.Catalog, redisSetup string, url string, generatedToken, generatedSecret bool, stdout io.Writer, log *slog.Logger) error {
	mode := "mysql+redis:" + redisSetup
	if cfg.Lock.Backend == config.BackendZooKeeper {
		mode = fmt.Sprintf("mysql+zookeeper(%d)", len(cfg.ZooKeeper.Addrs))
	}
	switch {
	case cfg.Embedded():
		mode = "embedded"
		demo, err := catalog.Create(ctx, service.NewSKU{Name: "Demo flash-sale item", Stock: 100, PerUserLimit: 1})
		if err != nil {
			return fmt.Errorf("seed demo sku: %w", err)
		}
		var shoppers []demoShopper
		if cfg.Auth.Shopper == config.ShopperJWT && cfg.Auth.JWT.Secret != "" {
			for _, sub := range quickStartShoppers {
				tok, err := ShopperToken(cfg.Auth.JWT, sub, QuickStartTokenTTL)
				if err != nil {
					return err
				}
				shoppers = append(shoppers, demoShopper{sub, tok})
			}
		}
		qs := quickStart{url: url, adminToken: cfg.Admin.Tokens()[0], shoppers: shoppers, demo: demo}
		if tokens := strings.Split(cfg.Auth.PaymentTokens, ","); tokens[0] != "" {
			qs.paymentToken = strings.TrimSpace(tokens[0])
		}
		if generatedSecret {
			qs.mint = mintCommand(cfg.Auth.JWT)
		}
		printQuickStart(stdout, qs)
	case generatedToken:
		fmt.Fprintf(stdout, "admin token (generated): %s\n", cfg.Admin.Token)
	}
	log.Info("serving", "url", url, "mode", mode)
	if !cfg.Embedded() {
		hintFirstSKU(ctx, catalog, log, url)
	}
	return nil
}

// quickStartShoppers are the demo shoppers the quick start prints tokens for.
var quickStartShoppers = []string{"u-1", "u-2", "u-3"}

type demoShopper struct{ sub, token string }

// quickStart is what the embedded mode prints.
type quickStart struct {
	url, adminToken string
	paymentToken    string        // the payment system's; "" with none
	shoppers        []demoShopper // none with auth.shopper none
	mint            string        // the command minting more tokens; "" unless the secret was generated
	demo            service.SKU
}

// mintCommand is the `seckill token` command line that mints tokens this
// instance accepts: its generated secret, and any issuer or audience that
// is not the default.
func mintCommand(j config.JWT) string {
	var b strings.Builder
	fmt.Fprintf(&b, "SECKILL_AUTH_JWT_SECRET=%s", j.Secret) // hex: nothing to quote
	def := config.Default().Auth.JWT
	if j.Issuer != def.Issuer {
		fmt.Fprintf(&b, " SECKILL_AUTH_JWT_ISSUER=%s", shellQuote(j.Issuer))
	}
	if j.Audience != def.Audience {
		fmt.Fprintf(&b, " SECKILL_AUTH_JWT_AUDIENCE=%s", shellQuote(j.Audience))
	}
	b.WriteString(" go run ./cmd/seckill token -sub u-4")
	return b.String()
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func printQuickStart(w io.Writer, q quickStart) {
	var b strings.Builder
	fmt.Fprintf(&b, "\nseckill is running at %s (embedded mode: in-process Redis and SQLite, discarded at exit)\n", q.url)
	fmt.Fprintf(&b, "  admin token: %s\n", q.adminToken)
	if q.paymentToken != "" {
		fmt.Fprintf(&b, "  payment token (the payment system's): %s\n", q.paymentToken)
	}
	fmt.Fprintf(&b, "  demo SKU:    id %d, %q, %d units, %d per user\n\n", q.demo.ID, q.demo.Name, q.demo.Stock, q.demo.PerUserLimit)
	buy := func(user, auth string) {
		fmt.Fprintf(&b, "  curl -s -X POST %s/api/v1/orders%s -H 'Content-Type: application/json' -d '{\"sku_id\":%d,\"user_id\":\"%s\",\"quantity\":1}'\n", q.url, auth, q.demo.ID, user)
	}
	if len(q.shoppers) == 0 {
		b.WriteString("Buy one (auth.shopper none: any user_id):\n")
		buy("u-1", "")
	}
	for _, s := range q.shoppers {
		fmt.Fprintf(&b, "Buy one as %s (shopper token valid %s):\n", s.sub, QuickStartTokenTTL)
		buy(s.sub, " -H 'Authorization: Bearer "+s.token+"'")
	}
	if q.mint != "" {
		b.WriteString("\nMint a token for another shopper (this instance's throwaway HS256 secret, gone at exit):\n")
		fmt.Fprintf(&b, "  %s\n", q.mint)
	}
	if q.paymentToken != "" {
		b.WriteString("\nConfirm an order's payment as the payment system would (ORDER_ID: a buy's order_id):\n")
		fmt.Fprintf(&b, "  curl -s -X POST %s/internal/v1/orders/$ORDER_ID/paid -H 'Authorization: Bearer %s'\n", q.url, q.paymentToken)
	}
	fmt.Fprintf(&b, "\nSee the stock as an admin:\n  curl -s %s/admin/v1/skus/%d -H 'Authorization: Bearer %s'\n\n", q.url, q.demo.ID, q.adminToken)
	fmt.Fprint(w, b.String())
}

func randomToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return hex.EncodeToString(b[:])
}

// hintFirstSKU logs how to create a SKU when the database has none, for
// an operator starting against an empty MySQL. The token is named, never
// printed.
func hintFirstSKU(ctx context.Context, catalog *service.Catalog, log *slog.Logger, url string) {
	list, err := catalog.List(ctx, 0, 1)
	if err != nil || len(list) > 0 {
		return // a database that does not answer is /readyz's to report
	}
	log.Info("no SKU yet: create one with the admin API",
		"example", "curl -s -X POST "+url+`/admin/v1/skus -H "Authorization: Bearer $SECKILL_ADMIN_TOKEN" -H 'Content-Type: application/json' -d '{"name":"Limited sneaker","stock":100,"per_user_limit":1}'`)
}
