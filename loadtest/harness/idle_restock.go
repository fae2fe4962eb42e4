package harness

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/seckill/seckill/internal/config"
)

// The idle-restock run (-scenario idle-restock, loadtest/README.md):
// idleRounds of a sell-out, an idle gap that leaves every sold-out mark
// stale, a restock to idleUnits and idleBurst buyers who must each buy.
const (
	idleUnits  = 30
	idleBurst  = 20
	idleRounds = 3
)

// RunIdleRestock starts the database, a private Redis and cfg's instances,
// runs idle.js and holds every answer to the sale's checks.
func RunIdleRestock(ctx context.Context, cfg Config) (res ScenarioResult, err error) {
	// Two or more instances: the first restocks, the others sell; buyers
	// are named in the body.
	sc := scenario{name: "idle-restock", minInstances: 2, units: idleUnits, env: []string{"SECKILL_AUTH_SHOPPER=none"}}
	r, err := sc.start(ctx, cfg)
	defer r.stop()
	if err != nil {
		return res, err
	}
	def := config.Default()
	idle := def.SoldOut.LocalTTL + def.SoldOut.Recheck + time.Second
	after := r.cfg.SoldOutBound + 500*time.Millisecond
	k6res, err := r.runScript(ctx, "idle.js", "k6", scriptLimit, map[string]string{
		"BASE_URLS": strings.Join(r.baseURLs, ","), "SKU_ID": strconv.FormatInt(r.skuID, 10), "UNITS": strconv.Itoa(idleUnits),
		"ROUNDS": strconv.Itoa(idleRounds), "BURST": strconv.Itoa(idleBurst), "IDLE_MS": ms(idle), "AFTER_MS": ms(after),
	}, "ADMIN_TOKEN="+r.token)
	if err != nil {
		return res, err
	}
	res.line("idle restock: %d rounds of sell-out, %s idle, restock to %d through instance-0, %d buyers at the others %s later",
		idleRounds, idle, idleUnits, idleBurst, after)
	return res, r.checkScript(ctx, &res, k6res, idleUnits)
}
