package handler

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzAppendError: the error body is what encoding/json writes of an
// errorBody, whatever its strings hold.
func FuzzAppendError(f *testing.F) {
	f.Add("sold_out", "the SKU is sold out", "0123456789abcdef", "")
	f.Add("sold_out", "the SKU is sold out", "0123456789abcdef", "4bf92f3577b34da6a3ce929d0e0e4736")
	f.Add("invalid_request", `field "x<y>&z" is "not known"`+"\u2028\xff\t", "", "\xff<")
	f.Fuzz(func(t *testing.T, code, message, requestID, traceID string) {
		want, err := json.Marshal(errorBody{errorDetail{Code: code, Message: message, RequestID: requestID, TraceID: traceID}})
		if err != nil {
			t.Fatal(err)
		}
		if got := appendError(nil, code, message, requestID, traceID); !bytes.Equal(got, want) {
			t.Fatalf("appendError = %s; encoding/json writes %s", got, want)
		}
	})
}
