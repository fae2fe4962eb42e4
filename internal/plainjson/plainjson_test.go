package plainjson_test

import (
	"testing"

	"github.com/seckill/seckill/internal/plainjson"
)

// Object reads only plain objects, whole; everything else it gives up on,
// for encoding/json to decide.
func TestObject(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want bool
		keys string // the keys member saw, joined
	}{
		{`{}`, true, ""},
		{` { "a" : "x" , "b":"y" } `, true, "ab"},
		{`{"a":"x",}`, false, "a"},
		{`{"a":"x"} {}`, false, "a"},
		{`{"a\u0062":"x"}`, false, ""}, // an escaped key might spell a known one
		{`{"a" "x"}`, false, ""},
		{`["a"]`, false, ""},
		{`{"a":"x"`, false, "a"},
		{``, false, ""},
	} {
		keys := ""
		got := plainjson.Object([]byte(tc.in), func(key []byte, i int) (int, bool) {
			keys += string(key)
			_, end, ok := plainjson.String([]byte(tc.in), i)
			return end, ok
		})
		if got != tc.want || keys != tc.keys {
			t.Errorf("Object(%q) = %v, keys %q; want %v, %q", tc.in, got, keys, tc.want, tc.keys)
		}
	}
}

func TestString(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]bool{
		`"plain"`: true, `"ünïcode"`: true, `""`: true,
		`"esc\"aped"`: false, "\"tab\there\"": false, "\"\xff\"": false, `"open`: false, `plain`: false,
	} {
		if _, _, ok := plainjson.String([]byte(in), 0); ok != want {
			t.Errorf("String(%q) ok = %v; want %v", in, ok, want)
		}
	}
}
