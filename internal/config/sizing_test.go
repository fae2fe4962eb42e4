package config

import "testing"

// mariaDBMaxConnections is a stock MariaDB's max_connections, which the
// tests' own servers keep (scripts/with-test-servers.sh).
const mariaDBMaxConnections = 151

// TestDefaultPoolFitsADefaultServer: the sizing rule of
// docs/operations.md#sizing holds at the defaults: four instances, each at
// mysql.max_open_conns, fit a default MariaDB with room for an operator's
// client, backups and replicas (a tenth of the server).
func TestDefaultPoolFitsADefaultServer(t *testing.T) {
	const instances, room = 4, mariaDBMaxConnections / 10
	if pool := Default().MySQL.MaxOpenConns; instances*pool+room > mariaDBMaxConnections {
		t.Errorf("%d instances × mysql.max_open_conns %d + %d = %d; want at most a default server's %d",
			instances, pool, room, instances*pool+room, mariaDBMaxConnections)
	}
	if idle := Default().MySQL.MaxIdleConns; idle > Default().MySQL.MaxOpenConns {
		t.Errorf("mysql.max_idle_conns %d above max_open_conns %d", idle, Default().MySQL.MaxOpenConns)
	}
}
