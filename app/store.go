package app

import (
	"gorm.io/gorm"

	"github.com/seckill/seckill/internal/config"
	"github.com/seckill/seckill/repository"
	"github.com/seckill/seckill/service"
)

// dataStore is what the service needs of its database: each of
// repository's stores is one.
type dataStore interface {
	service.Store
	service.LifecycleStore
}

// newStore is the store of the database openDatabase opened: SQLite in
// embedded mode, else MySQL, confirming commits and reads with confirm
// when set.
func newStore(cfg config.Config, db *gorm.DB, confirm service.Replicas) dataStore {
	if cfg.Embedded() {
		return repository.NewSQLite(db)
	}
	var opts []repository.Option
	if confirm != nil {
		opts = append(opts, repository.WithReplicas(confirm))
	}
	return repository.NewMySQL(db, opts...)
}
