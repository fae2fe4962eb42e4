package handler

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// TestUnmarshalRefusesDuplicateKeys: a member given twice is refused,
// however it is spelled (escaped, in another case, which encoding/json
// matches to the same field) and however deep, whatever the decoder
// would do with it (encoding/json keeps the last).
func TestUnmarshalRefusesDuplicateKeys(t *testing.T) {
	for _, tc := range []struct{ body, dup string }{
		{`{"sku_id":1,"quantity":1,"quantity":2}`, "quantity"},
		{`{"quantity":1,"sku_id":1,"quantity":1}`, "quantity"},
		{`{"sku_id":1,"quantity":1,"quan\u0074ity":2}`, "quantity"},
		{`{"sku_id":1,"quantity":1,"Quantity":2}`, "Quantity"},
		{`{"sku_id":1,"quantity":1,"user_id":"a","USER_ID":"b"}`, "USER_ID"},
		{`{"sku_id":1,"quantity":1,"user_id":"a","user_id":null}`, "user_id"},
	} {
		var r orderRequest
		msg := unmarshal([]byte(tc.body), &r)
		if !strings.Contains(msg, `"`+tc.dup+`"`) || !strings.Contains(msg, "more than once") {
			t.Errorf("unmarshal(%s) = %q; want it refused for %q given more than once", tc.body, msg, tc.dup)
		}
	}
	if _, dup := duplicateKey([]byte(`{"a":{"b":1,"b":2}}`)); !dup {
		t.Error(`duplicateKey({"a":{"b":1,"b":2}}) found none; want the nested b`)
	}
	for _, body := range []string{
		`{"sku_id":1,"quantity":1}`,
		`{"sku_id":1,"quantity":1,"user_id":"quantity"}`,
		`{"a":{"b":1},"c":{"b":2}}`,
		`{"a":[{"b":1},{"b":2}]}`,
	} {
		if key, dup := duplicateKey([]byte(body)); dup {
			t.Errorf("duplicateKey(%s) = %q; want none", body, key)
		}
	}
}

// FuzzUnmarshalRefusesDuplicateKeys: for any body unmarshal accepts, the
// same body with one of its members given again (the same key, or the key
// in upper case, which encoding/json takes for the same field) before the
// closing brace is refused; and unmarshal never panics.
func FuzzUnmarshalRefusesDuplicateKeys(f *testing.F) {
	for _, s := range []string{
		`{"sku_id":1,"quantity":1}`,
		`{"sku_id":1,"quantity":1,"user_id":"u-1"}`,
		`{"user_id":"\u00e9","quantity":3,"sku_id":7}`,
		` { "sku_id" : 1 , "quantity" : 1 } `,
		`{"sku_id":1,"quantity":1,"quantity":2}`,
		`{}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var r orderRequest
		if unmarshal(body, &r) != "" {
			return
		}
		end := bytes.LastIndexByte(body, '}')
		for key, present := range map[string]bool{"sku_id": r.SKUID != nil, "quantity": r.Quantity != nil, "user_id": r.UserID != nil} {
			if !present {
				continue
			}
			for _, again := range []string{key, strings.ToUpper(key)} {
				b := append(append(bytes.Clone(body[:end]), `,"`+again+`":1`...), body[end:]...)
				if msg := unmarshal(b, new(orderRequest)); msg == "" {
					t.Errorf("unmarshal(%s) accepted %q given twice", b, key)
				}
			}
		}
	})
}

// FuzzKeysMayRepeat: the scan that spares most bodies the token walk never
// spares one the walk would refuse (any valid JSON, any nesting, escapes
// and case), and never panics, valid JSON or not.
func FuzzKeysMayRepeat(f *testing.F) {
	for _, s := range []string{
		`{"sku_id":1,"quantity":1,"user_id":"u-1"}`,
		`{"sku_id":1,"quantity":1,"quantity":2}`,
		`{"sku_id":1,"QUANTITY":1,"quantity":2}`,
		`{"quan\u0074ity":1,"quantity":2}`,
		`{"a":{"b":1,"b":2}}`,
		`{"a":[{"b":1},{"b":2}]}`,
		`{"a\"":1,"a\"" :2}`,
		`{"\u212a":1,"k":2}`,
		`{"x":"y:","y" :1}`,
		`"\`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		may := keysMayRepeat(body)
		if !json.Valid(body) {
			return
		}
		if key, dup := duplicateKeyWalk(body); dup && !may {
			t.Errorf("keysMayRepeat(%s) = false; the walk finds %q given twice", body, key)
		}
	})
}

// BenchmarkDuplicateKey: an order's body through the scan that spares it
// the token walk, and through the walk alone (docs/performance.md).
func BenchmarkDuplicateKey(b *testing.B) {
	body := []byte(`{"sku_id":12345,"quantity":1,"user_id":"user-000123"}`)
	for name, find := range map[string]func([]byte) (string, bool){"scan": duplicateKey, "walk": duplicateKeyWalk} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, dup := find(body); dup {
					b.Fatal("found a duplicate in a body without one")
				}
			}
		})
	}
}
