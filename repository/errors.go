package repository

import (
	"errors"
	"fmt"

	"github.com/go-sql-driver/mysql"
	"gorm.io/gorm"

	"github.com/seckill/seckill/internal/mysqlerr"
	"github.com/seckill/seckill/service"
)

// SQLite's extended result codes the store tells apart; MySQL's are in
// internal/mysqlerr.
const (
	sqliteConstraintCheck  = 275  // SQLITE_CONSTRAINT_CHECK
	sqliteConstraintUnique = 2067 // SQLITE_CONSTRAINT_UNIQUE
)

// violation is what a driver error says about the data.
type violation int

const (
	violationNone   violation = iota // not a constraint: the database failed or refused
	violationUnique                  // a unique key: a concurrent writer inserted first
	violationCheck                   // a CHECK constraint
	violationRetry                   // a deadlock: the server rolled back; a retry re-reads
	violationData                    // a value the column cannot hold: a retry fails alike
)

// violationOf reads either driver's error by its type, so the code both
// stores share translates without knowing which database it runs on.
func violationOf(err error) violation {
	var (
		myErr *mysql.MySQLError
		code  interface{ Code() int }
	)
	switch {
	case errors.As(err, &myErr):
		switch myErr.Number {
		case mysqlerr.DuplicateEntry:
			return violationUnique
		case mysqlerr.CheckViolated, mysqlerr.ConstraintFailed:
			return violationCheck
		case mysqlerr.OutOfRange:
			// Only a holding can leave its INT: past 2^31-1 it is over
			// every per-user limit (at most 2^30), the CHECK's refusal.
			return violationCheck
		case mysqlerr.Deadlock:
			return violationRetry
		case mysqlerr.DataTooLong, mysqlerr.IncorrectString:
			return violationData
		}
	case errors.As(err, &code):
		switch code.Code() {
		case sqliteConstraintUnique:
			return violationUnique
		case sqliteConstraintCheck:
			return violationCheck
		}
	}
	return violationNone
}

// translate maps a driver error to the service's sentinels: a missing row
// to notFound; a unique or CHECK violation or a deadlock to
// service.ErrConflict, which a retry re-reads; anything else to
// service.ErrUnavailable.
func translate(err, notFound error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, service.ErrConflict), errors.Is(err, service.ErrSKUNotFound),
		errors.Is(err, service.ErrStaleFence), errors.Is(err, service.ErrOutcomeUnknown),
		errors.Is(err, service.ErrUnavailable):
		return err
	case errors.Is(err, gorm.ErrRecordNotFound):
		return notFound
	}
	if v := violationOf(err); v != violationNone && v != violationData {
		return fmt.Errorf("%w: %w", service.ErrConflict, err)
	}
	return fmt.Errorf("%w: %w", service.ErrUnavailable, err)
}

// translateBatch is translate for a batch of one SKU. A one-request batch
// whose CHECK failed can only have met the per-user limit.
func translateBatch(err error, b service.Batch) error {
	if len(b.Requests) == 1 && violationOf(err) == violationCheck {
		return fmt.Errorf("%w: %w", service.ErrLimitExceeded, err)
	}
	return translate(err, service.ErrSKUNotFound)
}
