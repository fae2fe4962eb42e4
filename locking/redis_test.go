package locking_test

import (
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/locking"
)

// TestRedisMarks_KeepTheNewestVersionOfTheirIncarnation: a mark of an
// older version does not overwrite a newer one, and a mark of another
// incarnation of the SKU (a recreated database) reads as no mark.
func TestRedisMarks_KeepTheNewestVersionOfTheirIncarnation(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	m := locking.NewRedisMarks(rdb, prefix+"soldout:", time.Minute)
	marksKeepTheNewestVersionOfTheirIncarnation(t, m)
}
