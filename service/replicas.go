package service

import (
	"context"
	"errors"
)

// Commit says where a transaction committed and what it saw: the
// primary's server id and its binary log position (MariaDB GTIDs) read
// after the COMMIT, in the same round trip. The position covers the
// commit and every commit the transaction read. Zero when the Store does
// not track positions (no replicas configured).
type Commit struct {
	Server int64
	GTIDs  string
}

// Replicas confirms that commits reached enough replicas of the primary
// (mysql.min_replicas): an answer decided on a commit is given only once
// they have it, so that losing the primary's machine loses nothing that
// was acknowledged.
type Replicas interface {
	// Confirm returns nil once enough replicas have c, else, within its
	// own bound (mysql.replica_timeout) or when ctx ends, an error
	// wrapping ErrNotReplicated.
	Confirm(ctx context.Context, c Commit) error
}

// ErrNotReplicated is a commit that enough replicas did not confirm in
// time: it may be lost with the primary. Buyers are told
// ErrOutcomeUnknown; a retry with the same Idempotency-Key finds the
// order or places it once.
var ErrNotReplicated = errors.New("commit not confirmed by enough replicas")
