package handler

import (
	"fmt"
	"reflect"
	"testing"
)

// FuzzFastOrderDecidesLikeUnmarshal: whatever body the fast path takes,
// the general path takes too, reading the same fields.
func FuzzFastOrderDecidesLikeUnmarshal(f *testing.F) {
	for _, seed := range []string{
		`{"sku_id":1,"user_id":"u-1","quantity":1}`,
		` { "quantity" : 2 , "sku_id" : 9223372036854775807, "user_id" : "ü", "wait" : true } `,
		`{"sku_id":-0,"quantity":1,"wait":false}`,
		`{"sku_id":01,"quantity":1}`, `{"sku_id":1.0,"quantity":1}`, `{"sku_id":1e2,"quantity":1}`,
		`{"sku_id":1,"sku_id":2}`, `{"SKU_ID":1}`, `{"sku_id":1,}`, `{}`, `{"user_id":"a\"b"}`,
		`{"user_id":"\xff"}`, `{"wait":null}`, `{"wait":"true"}`, `{"sku_id":99999999999999999999}`,
		`{"sku_id":1} {}`, `{"sku_id":1}x`, `[1]`, `{"sku_id":1,"extra":2}`, "{\"user_id\":\"a\tb\"}",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var fast, general orderRequest
		if !fastOrder(body, &fast) {
			if fast != (orderRequest{}) {
				t.Fatalf("%q: refused, yet dst = %+v", body, fast)
			}
			return
		}
		if msg := unmarshal(body, &general); msg != "" {
			t.Fatalf("%q: the fast path took it, the general path refuses: %s", body, msg)
		}
		if !reflect.DeepEqual(fast, general) {
			t.Fatalf("%q: fast %s; general %s", body, show(fast), show(general))
		}
	})
}

// TestFastOrderTakesTheUsualBody: the bodies clients send go the fast way.
func TestFastOrderTakesTheUsualBody(t *testing.T) {
	for _, body := range []string{
		`{"sku_id":1,"user_id":"u-1","quantity":1}`,
		`{"sku_id":7,"quantity":2,"wait":true}`,
		"{\n  \"sku_id\": 7,\n  \"quantity\": 2\n}\n",
	} {
		var r orderRequest
		if !fastOrder([]byte(body), &r) || r.SKUID == nil || r.Quantity == nil {
			t.Errorf("fastOrder(%q) = %s; want taken", body, show(r))
		}
	}
}

func show(r orderRequest) string {
	deref := func(p any) any {
		if v := reflect.ValueOf(p); !v.IsNil() {
			return v.Elem().Interface()
		}
		return nil
	}
	return fmt.Sprint(deref(r.SKUID), deref(r.UserID), deref(r.Quantity), deref(r.Wait))
}
