package app

import (
	"context"

	"gorm.io/gorm"

	"github.com/seckill/seckill/engine"
	"github.com/seckill/seckill/events"
	"github.com/seckill/seckill/internal/config"
	"github.com/seckill/seckill/repository"
	"github.com/seckill/seckill/service"
)

// The producers of the engine's ports, asserted here so that neither
// repository nor service imports the engine.
var (
	_ engine.Committer = (*repository.MySQL)(nil)
	_ engine.Committer = (*repository.SQLite)(nil)
	_ engine.Replicas  = (*repository.Replicas)(nil)
	_ engine.SKUs      = (*service.Directory)(nil)
)

// dataStore is a store of repository as the wiring hands it out: one
// value that fills each consumer's port (the engine's commits, the
// rules' reads, the catalog's, the lifecycle's, readiness's ping). It is
// no port itself: nobody calls it whole.
type dataStore interface {
	engine.Committer
	service.OrderReader
	service.CatalogStore
	service.SKUOrders
	service.LifecycleStore
	service.OrderStates
	events.Outbox
	pinger
}

// pinger is what readiness asks of the database.
type pinger interface {
	Ping(ctx context.Context) error
}

// newStore is the store of the database openDatabase opened: SQLite in
// embedded mode, else MySQL, confirming commits and reads with confirm
// when set.
func newStore(cfg config.Config, db *gorm.DB, confirm repository.Confirmer) dataStore {
	opts := []repository.Option{repository.WithPaymentTimeout(cfg.Order.PaymentTimeout)}
	if cfg.Events.Enabled {
		opts = append(opts, repository.WithEvents())
	}
	if cfg.Embedded() {
		return repository.NewSQLite(db, opts...)
	}
	if confirm != nil {
		opts = append(opts, repository.WithReplicas(confirm))
	}
	return repository.NewMySQL(db, opts...)
}
