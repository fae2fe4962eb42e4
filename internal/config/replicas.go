package config

import (
	"fmt"

	"github.com/go-sql-driver/mysql"
)

// validateReplicas checks the MariaDB replication settings: every replica
// DSN parses (without echoing it: it may hold a password), and
// min_replicas asks for no more replicas than are listed.
func (c Config) validateReplicas() error {
	for i, dsn := range c.MySQL.Replicas {
		if _, err := mysql.ParseDSN(dsn); err != nil {
			return fmt.Errorf("config: mysql.replicas (SECKILL_MYSQL_REPLICAS): item %d is not a DSN", i+1)
		}
	}
	if c.MySQL.MinReplicas > len(c.MySQL.Replicas) {
		return fmt.Errorf("config: mysql.min_replicas (SECKILL_MYSQL_MIN_REPLICAS) %d needs at least that many mysql.replicas (SECKILL_MYSQL_REPLICAS); %d listed",
			c.MySQL.MinReplicas, len(c.MySQL.Replicas))
	}
	if len(c.MySQL.Replicas) > 0 && c.Embedded() {
		return fmt.Errorf("config: mysql.replicas (SECKILL_MYSQL_REPLICAS) needs mysql.dsn (SECKILL_MYSQL_DSN): the embedded store has no replicas")
	}
	if c.MySQL.MinReplicas > 0 && c.MySQL.ReplicaTimeout >= c.Order.RequestTimeout {
		return fmt.Errorf("config: mysql.replica_timeout (%v) must be shorter than order.request_timeout (%v): a buyer waits for the confirmation",
			c.MySQL.ReplicaTimeout, c.Order.RequestTimeout)
	}
	return nil
}
