// Package mysqlerr names the MySQL and MariaDB server error numbers
// (mysql.MySQLError.Number) that the store and its tools tell apart, so
// each number is written once.
package mysqlerr

// Server error numbers, named after the server's ER_ symbols.
const (
	TooManyConnections     = 1040 // ER_CON_COUNT_ERROR: max_connections reached
	DuplicateEntry         = 1062 // ER_DUP_ENTRY: a unique key already holds the value
	NoSuchTable            = 1146 // ER_NO_SUCH_TABLE: the table does not exist (an unmigrated database)
	TooManyUserConnections = 1203 // ER_TOO_MANY_USER_CONNECTIONS: max_user_connections reached
	ReadOnly               = 1290 // ER_OPTION_PREVENTS_STATEMENT: --read-only refused a write (a demoted primary)
	LockWaitTimeout        = 1205 // ER_LOCK_WAIT_TIMEOUT: the statement gave up waiting for a row lock
	OutOfRange             = 1264 // ER_WARN_DATA_OUT_OF_RANGE: a value past its column's range (strict mode)
	Deadlock               = 1213 // ER_LOCK_DEADLOCK: the server rolled the transaction back
	IncorrectString        = 1366 // ER_TRUNCATED_WRONG_VALUE_FOR_FIELD: bytes not in the column's character set
	DataTooLong            = 1406 // ER_DATA_TOO_LONG: a value longer than its column
	CheckViolated          = 3819 // ER_CHECK_CONSTRAINT_VIOLATED: a CHECK failed (MySQL 8)
	ConstraintFailed       = 4025 // ER_CONSTRAINT_FAILED: a CHECK failed (MariaDB)
)
