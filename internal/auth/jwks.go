package auth

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"time"

	"github.com/MicahParks/keyfunc/v3"
	"golang.org/x/time/rate"
)

// newJWKS fetches the JWK Set and keeps it fresh. A file is read through
// a file: transport, so it is refreshed the same way a URL is.
func newJWKS(ctx context.Context, cfg Config, log *slog.Logger) (keyfunc.Keyfunc, error) {
	timeout := positive(cfg.JWKSTimeout, 5*time.Second)
	u := cfg.JWKS
	client := &http.Client{Timeout: timeout}
	if !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
		abs, err := filepath.Abs(u)
		if err != nil {
			return nil, fmt.Errorf("auth: jwks %s: %w", u, err)
		}
		t := &http.Transport{}
		t.RegisterProtocol("file", http.NewFileTransport(http.Dir("/")))
		client.Transport = t
		u = "file://" + filepath.ToSlash(abs)
	}
	noStartErr := false
	kf, err := keyfunc.NewDefaultOverrideCtx(ctx, []string{u}, keyfunc.Override{
		Client:                    client,
		HTTPTimeout:               timeout,
		NoErrorReturnFirstHTTPReq: &noStartErr,
		RefreshInterval:           positive(cfg.JWKSRefresh, 5*time.Minute),
		// Tokens naming an unknown kid trigger a refresh at most this
		// often; a request that finds no refresh allowed is refused at
		// once rather than made to wait (RateLimitWaitMax bounds both the
		// wait and the fetch).
		RefreshUnknownKID: rate.NewLimiter(rate.Every(positive(cfg.JWKSUnknownKIDInterval, 30*time.Second)), 1),
		RateLimitWaitMax:  timeout,
		RefreshErrorHandlerFunc: func(u string) func(context.Context, error) {
			return func(ctx context.Context, err error) {
				log.WarnContext(ctx, "jwks refresh failed; keeping the keys we have", "url", u, "err", err)
			}
		},
	})
	if err != nil {
		return nil, fmt.Errorf("auth: jwks %s: %w", cfg.JWKS, err)
	}
	return kf, nil
}

func positive(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}
