package app

import (
	"context"
	"log/slog"

	"github.com/seckill/seckill/service"
)

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
