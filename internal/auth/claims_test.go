package auth

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/golang-jwt/jwt/v5"
)

// claimsCases are claims sets of every shape: the plain one identity
// providers write, and what must fall back to encoding/json.
var claimsCases = []string{
	`{"sub":"u-1","aud":"seckill","iat":1700000000,"exp":1700003600}`,
	`{"sub":"u-1","iss":"https://idp.test","aud":["seckill"],"iat":1700000000,"nbf":1700000000,"exp":1700003600,"jti":"x"}`,
	` { "sub" : "u-1" , "aud" : [ "a" , "b" ] , "exp" : 0 } `,
	`{"aud":["a","b","c"],"exp":1}`,
	`{}`, ` {} `, `{"exp":1700003600}`,
	`{"sub":"ü-ñ","exp":1700003600,"extra":{"a":[1,2,{"b":"}"}],"c":"\"]"},"n":null,"t":true,"f":-1.5e3}`,
	`{"extra":"x","sub":"u"}`, `{"x":[],"y":{},"sub":"u","z":"a\\\"b"}`,
	// Fall back: the same answer as encoding/json, whatever it is.
	`{"sub":"u-1","sub":"u-2"}`, `{"exp":1,"exp":null}`, `{"SUB":"u"}`, `{"Exp":1}`, `{"ſub":"u"}`,
	`{"s\u0075b":"u"}`, `{"sub":"a\nb"}`, `{"sub":"a\u00e9"}`, `{"sub":"\ud800"}`, "{\"sub\":\"\xff\"}",
	`{"sub":null}`, `{"sub":1}`, `{"sub":true}`, `{"sub":["u"]}`, `{"aud":null}`, `{"aud":[]}`,
	`{"aud":[1]}`, `{"aud":1}`, `{"aud":["a",null]}`, `{"exp":1.5}`, `{"exp":1e3}`, `{"exp":-1}`,
	`{"exp":"1700000000"}`, `{"exp":"x"}`, `{"exp":true}`, `{"exp":null}`, `{"exp":1234567890123456}`,
	`{"exp":99999999999999999999}`, `{"iat":[1]}`, `{"nbf":{}}`, `{"jti":2}`,
	`null`, `[]`, `1`, `"x"`, `{"a":1}x`, `{"sub":"u",}`, `{"sub" "u"}`, `{`, ``,
}

// decodeRegistered is what golang-jwt did before: encoding/json into
// RegisteredClaims through the jwt.Claims interface.
func decodeRegistered(data []byte) (jwt.RegisteredClaims, error) {
	var rc jwt.RegisteredClaims
	var c jwt.Claims = &rc
	err := json.Unmarshal(data, &c)
	return rc, err
}

func decodeFast(data []byte) (jwt.RegisteredClaims, error) {
	var fc claims
	var c jwt.Claims = &fc
	err := json.Unmarshal(data, &c)
	return fc.RegisteredClaims, err
}

// sameClaims compares what the validator reads: equal times, not equal
// pointers.
func sameClaims(a, b jwt.RegisteredClaims) bool {
	sameTime := func(x, y *jwt.NumericDate) bool {
		if x == nil || y == nil {
			return x == y
		}
		return x.Equal(y.Time)
	}
	return a.Issuer == b.Issuer && a.Subject == b.Subject && a.ID == b.ID &&
		reflect.DeepEqual(a.Audience, b.Audience) &&
		sameTime(a.ExpiresAt, b.ExpiresAt) && sameTime(a.NotBefore, b.NotBefore) && sameTime(a.IssuedAt, b.IssuedAt)
}

func checkSameClaims(t *testing.T, data []byte) {
	t.Helper()
	want, wantErr := decodeRegistered(data)
	got, gotErr := decodeFast(data)
	if (gotErr != nil) != (wantErr != nil) {
		t.Fatalf("decode %q: error %v; encoding/json's %v", data, gotErr, wantErr)
	}
	if wantErr == nil && !sameClaims(got, want) {
		t.Fatalf("decode %q = %+v; encoding/json's %+v", data, got, want)
	}
}

// TestClaimsDecodeLikeEncodingJSON: the plain-shape decoder gives the
// claims encoding/json gives, and fails where it fails.
func TestClaimsDecodeLikeEncodingJSON(t *testing.T) {
	for _, tc := range claimsCases {
		checkSameClaims(t, []byte(tc))
	}
}

// TestClaimsPlainShapeIsDecodedWithoutEncodingJSON: the common shapes take
// the fast path (else the speed-up is gone without a test failing).
func TestClaimsPlainShapeIsDecodedWithoutEncodingJSON(t *testing.T) {
	for _, tc := range []string{
		`{"sub":"u-1","aud":"seckill","iat":1700000000,"exp":1700003600}`,
		`{"iss":"https://idp.test","sub":"u-1","aud":["seckill"],"exp":1700003600,"nbf":1700000000,"iat":1700000000}`,
		`{"sub":"u-1","exp":1700003600,"scope":"openid profile","azp":"shop","roles":["a","b"],"n":{"x":null}}`,
	} {
		var c claims
		if !c.decodePlain([]byte(tc)) {
			t.Errorf("decodePlain(%s) = false; want the plain shape decoded", tc)
		}
	}
}

func FuzzClaimsDecode(f *testing.F) {
	for _, tc := range claimsCases {
		f.Add([]byte(tc))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkSameClaims(t, data)
	})
}
