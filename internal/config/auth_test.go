package config

import (
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestAuth_ShippedConfigs(t *testing.T) {
	cfg, err := Load(filepath.Join("..", "..", "configs", "seckill.yaml"), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	got, want := cfg.Auth, Default().Auth
	if len(got.JWT.Algorithms) != 0 {
		t.Errorf("configs/seckill.yaml auth.jwt.algorithms = %v; want the default, empty", got.JWT.Algorithms)
	}
	got.JWT.Algorithms, want.JWT.Algorithms = nil, nil
	if !reflect.DeepEqual(got, want) {
		t.Errorf("configs/seckill.yaml auth = %+v; want Default() %+v: the documented defaults are stale", got, want)
	}
	local, err := Load(filepath.Join("..", "..", "configs", "local.yaml"), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if err := local.ValidateServe(); err != nil {
		t.Errorf("configs/local.yaml would not serve: %v", err)
	}
}

func TestAuth_Env(t *testing.T) {
	cfg, err := Load("", env(map[string]string{
		"SECKILL_AUTH_SHOPPER":                       "jwt",
		"SECKILL_AUTH_ORDER_ID_KEY":                  strings.Repeat("ab", 32),
		"SECKILL_AUTH_JWT_JWKS":                      "https://idp.test/jwks.json",
		"SECKILL_AUTH_JWT_ALGORITHMS":                "RS256, EdDSA",
		"SECKILL_AUTH_JWT_ISSUER":                    "https://idp.test/",
		"SECKILL_AUTH_JWT_AUDIENCE":                  "shop",
		"SECKILL_AUTH_JWT_LEEWAY":                    "5s",
		"SECKILL_AUTH_JWT_JWKS_REFRESH":              "1m",
		"SECKILL_AUTH_JWT_JWKS_UNKNOWN_KID_INTERVAL": "10s",
		"SECKILL_AUTH_JWT_MAX_TOKEN_BYTES":           "2048",
		"SECKILL_ADMIN_TOKEN":                        "old-admin-token-0123, new-admin-token-4567",
	}))
	if err != nil {
		t.Fatal(err)
	}
	j := cfg.Auth.JWT
	if !slices.Equal(j.Algorithms, []string{"RS256", "EdDSA"}) || j.JWKS != "https://idp.test/jwks.json" || j.Issuer != "https://idp.test/" ||
		j.Audience != "shop" || j.Leeway != 5*time.Second || j.JWKSRefresh != time.Minute || j.JWKSUnknownKIDInterval != 10*time.Second || j.MaxTokenBytes != 2048 {
		t.Errorf("auth.jwt from the environment = %+v", j)
	}
	if got := cfg.Admin.Tokens(); !slices.Equal(got, []string{"old-admin-token-0123", "new-admin-token-4567"}) {
		t.Errorf("Admin.Tokens() = %q; want the two of the list", got)
	}
	for key, val := range map[string]string{
		"SECKILL_AUTH_JWT_LEEWAY":          "soon",
		"SECKILL_AUTH_JWT_MAX_TOKEN_BYTES": "big",
	} {
		if _, err := Load("", env(map[string]string{key: val})); err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("Load with %s=%q = %v; want an error naming it", key, val, err)
		}
	}
}

// TestAuth_Defaults: jwt is the default; none must be chosen; the quick
// start (no DSN) needs no key, a DSN needs one.
func TestAuth_Defaults(t *testing.T) {
	d := Default()
	if d.Auth.Shopper != ShopperJWT {
		t.Errorf("default auth.shopper = %q; want jwt", d.Auth.Shopper)
	}
	if err := d.ValidateServe(); err != nil {
		t.Errorf("the quick start's defaults = %v; want valid (keys are generated)", err)
	}
	withDSN := d
	withDSN.MySQL.DSN, withDSN.Redis.Addrs, withDSN.Admin.Token = "root@tcp(127.0.0.1:3306)/x", []string{"127.0.0.1:6379"}, "admin-token-0123456789"
	if err := withDSN.ValidateServe(); err == nil || !strings.Contains(err.Error(), "auth.jwt.secret") {
		t.Errorf("a DSN without a shopper key = %v; want an error naming auth.jwt.secret", err)
	}
	withDSN.Auth.Shopper = ShopperNone
	if err := withDSN.ValidateServe(); err == nil || !strings.Contains(err.Error(), "auth.order_id_key") {
		t.Errorf("none with a DSN and no order id key = %v; want an error naming auth.order_id_key", err)
	}
	withDSN.Auth.OrderIDKey = strings.Repeat("0f", 16)
	if err := withDSN.ValidateServe(); err != nil {
		t.Errorf("none chosen, with an order id key = %v; want valid", err)
	}
}
