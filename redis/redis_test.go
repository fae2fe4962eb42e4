package redis_test

import (
	"testing"
	"time"

	"github.com/seckill/seckill/app/apptest"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/redis"
)

// TestMarks_KeepTheNewestVersionOfTheirIncarnation: a mark of an older
// version does not overwrite a newer one, and a mark of another
// incarnation of the SKU (a recreated database) reads as no mark.
func TestMarks_KeepTheNewestVersionOfTheirIncarnation(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	m := redis.NewMarks(rdb, prefix+"soldout:", time.Minute)
	apptest.MarksKeepTheNewestVersionOfTheirIncarnation(t, m)
}
