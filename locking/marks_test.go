package locking_test

import (
	"context"
	"testing"

	"github.com/seckill/seckill/service"
)

// marksKeepTheNewestVersionOfTheirIncarnation checks fresh sold-out marks
// of either backend: a mark of an older version does not overwrite a newer
// one, and a mark of another incarnation of the SKU (a recreated database)
// reads as no mark.
func marksKeepTheNewestVersionOfTheirIncarnation(t *testing.T, m service.SoldOutMarks) {
	t.Helper()
	ctx := context.Background()
	old, cur := service.SKURef{ID: 7, Incarnation: 100}, service.SKURef{ID: 7, Incarnation: 200}
	steps := []struct {
		name string
		sku  service.SKURef
		set  int64 // 0: read only
		want map[service.SKURef]int64
	}{
		{"none yet", old, 0, map[service.SKURef]int64{old: 0, cur: 0}},
		{"first", old, 5, map[service.SKURef]int64{old: 5, cur: 0}},
		{"older version ignored", old, 3, map[service.SKURef]int64{old: 5, cur: 0}},
		{"newer version, other sign", old, -7, map[service.SKURef]int64{old: -7, cur: 0}},
		{"new incarnation replaces", cur, 2, map[service.SKURef]int64{old: 0, cur: 2}},
	}
	for _, s := range steps {
		if s.set != 0 {
			if err := m.SetMark(ctx, s.sku, s.set); err != nil {
				t.Fatalf("%s: SetMark(%v, %d) = %v", s.name, s.sku, s.set, err)
			}
		}
		for sku, want := range s.want {
			if got, err := m.Mark(ctx, sku); err != nil || got != want {
				t.Errorf("%s: Mark(%v) = %d, %v; want %d", s.name, sku, got, err, want)
			}
		}
	}
}
