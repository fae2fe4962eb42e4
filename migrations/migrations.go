// Package migrations holds the numbered SQL files of the schema, one folder
// per SQL dialect, embedded so that the binary can migrate a database alone.
package migrations

import "embed"

// FS holds mysql/*.sql (MySQL and MariaDB) and sqlite/*.sql (the embedded
// quick start). Both folders describe the same schema.
//
//go:embed mysql/*.sql sqlite/*.sql
var FS embed.FS
