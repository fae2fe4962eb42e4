package service

import "errors"

// Commit says where a transaction committed and what it saw: the
// primary's server id and its binary log position (MariaDB GTIDs) read
// after the COMMIT, in the same round trip. The position covers the
// commit and every commit the transaction read. Zero when the store does
// not track positions (no replicas configured).
type Commit struct {
	Server int64
	GTIDs  string
}

// ErrNotReplicated is a commit that enough replicas (mysql.min_replicas)
// did not confirm in time: it may be lost with the primary. Buyers are
// told ErrOutcomeUnknown; a retry with the same Idempotency-Key finds the
// order or places it once.
var ErrNotReplicated = errors.New("commit not confirmed by enough replicas")
