package handler

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// orderBodies are order bodies of every shape: the plain one clients
// send, and what must be left to encoding/json.
var orderBodies = []string{
	`{"sku_id":1,"user_id":"u-1","quantity":1}`,
	` { "quantity" : 3 ,	"user_id" : "käufer-用户-😀" , "sku_id" : 9223372036854775807 }
`,
	`{"sku_id":-9223372036854775808,"quantity":-0}`, `{"sku_id":0}`, `{}`, `{"user_id":""}`,
	`{"sku_id":9223372036854775808}`, `{"sku_id":-9223372036854775809}`, `{"sku_id":1.0}`, `{"sku_id":1e0}`,
	`{"sku_id":01}`, `{"sku_id":-}`, `{"sku_id":"1"}`, `{"sku_id":null}`, `{"sku_id":true}`, `{"sku_id":[1]}`,
	`{"sku_id":1,"sku_id":2}`, `{"SKU_ID":1}`, `{"Quantity":1}`, `{"sku\u005fid":1}`, `{"coupon":"x"}`,
	`{"user_id":"\u00e9t\u00e9"}`, `{"user_id":"a\"b"}`, "{\"user_id\":\"\xff\"}", "{\"user_id\":\"a\tb\"}",
	`{"user_id":7}`, `{"user_id":null}`, `{"sku_id":1,}`, `{"sku_id":1 "quantity":1}`, `{"sku_id":1}{}`,
	`{"sku_id":1} x`, `{"sku_id":1`, `{"sku_id"`, `{`, ``, `   `, `null`, `[]`, `"x"`, `1`, `{'sku_id':1}`,
	`{"sku_id":1}` + strings.Repeat(" ", 10),
}

// TestParseOrderOnlyWhatEncodingJSONAccepts: every body the plain-shape
// parser reads, encoding/json reads to the same request, so the fast path
// accepts nothing that was refused and changes no value.
func TestParseOrderOnlyWhatEncodingJSONAccepts(t *testing.T) {
	for _, body := range orderBodies {
		checkParseOrder(t, []byte(body))
	}
}

// TestParseOrderReadsThePlainShape: the bodies clients send take the fast
// path (else the speed-up is gone without a test failing).
func TestParseOrderReadsThePlainShape(t *testing.T) {
	for _, body := range []string{
		`{"sku_id":1,"user_id":"u-1","quantity":1}`,
		`{"quantity":1,"user_id":"u-1","sku_id":17}`,
		`{"sku_id": 1, "quantity": 2}`,
	} {
		var got orderRequest
		if !parseOrder([]byte(body), &got) {
			t.Errorf("parseOrder(%s) = false; want the plain shape read", body)
		}
	}
}

func checkParseOrder(t *testing.T, body []byte) {
	t.Helper()
	var got orderRequest
	if !parseOrder(body, &got) {
		return
	}
	var want orderRequest
	if msg := unmarshal(body, &want); msg != "" {
		t.Fatalf("parseOrder(%q) accepted a body encoding/json refuses: %s", body, msg)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("parseOrder(%q) = %s; encoding/json reads %s", body, show(got), show(want))
	}
}

func show(r orderRequest) string {
	s := func(p any) string {
		switch v := p.(type) {
		case *int64:
			if v != nil {
				return fmt.Sprint(*v)
			}
		case *string:
			if v != nil {
				return fmt.Sprintf("%q", *v)
			}
		}
		return "nil"
	}
	return fmt.Sprintf("{sku_id %s, user_id %s, quantity %s}", s(r.SKUID), s(r.UserID), s(r.Quantity))
}

func FuzzParseOrder(f *testing.F) {
	for _, body := range orderBodies {
		f.Add([]byte(body))
	}
	f.Fuzz(func(t *testing.T, body []byte) { checkParseOrder(t, body) })
}
