// Package plainjson reads the plain shape of a small JSON object without
// reflection: string keys and values without escapes, members a caller
// decodes itself. It never decides anything encoding/json would decide
// differently: whatever is not plain makes it give up, and the caller
// hands that input to encoding/json, which then decides and words the
// error. The shopper token's claims, read on every order, use it
// (docs/performance.md#hand-written-paths).
package plainjson

import (
	"bytes"
	"unicode/utf8"
)

// Object reads data, whole, as one JSON object, calling member for each
// member in order with its key (a plain string, see String) and the index
// of its value; member returns the index just after the value, or false
// to give up. Object reports whether data was such an object and every
// member was read.
func Object(data []byte, member func(key []byte, value int) (end int, ok bool)) bool {
	i := SkipSpace(data, 0)
	if i >= len(data) || data[i] != '{' {
		return false
	}
	i = SkipSpace(data, i+1)
	if i < len(data) && data[i] == '}' {
		return SkipSpace(data, i+1) == len(data)
	}
	for {
		key, next, ok := String(data, i)
		if !ok {
			return false // an escaped key might spell a known one
		}
		i = SkipSpace(data, next)
		if i >= len(data) || data[i] != ':' {
			return false
		}
		end, ok := member(key, SkipSpace(data, i+1))
		if !ok {
			return false
		}
		i = SkipSpace(data, end)
		if i >= len(data) {
			return false
		}
		switch data[i] {
		case ',':
			i = SkipSpace(data, i+1)
		case '}':
			return SkipSpace(data, i+1) == len(data)
		default:
			return false
		}
	}
}

// String returns the contents of the JSON string at data[i:] when it
// holds no escape, no control character and only valid UTF-8 (what
// encoding/json returns unchanged), and the index after its closing quote.
func String(data []byte, i int) ([]byte, int, bool) {
	if i >= len(data) || data[i] != '"' {
		return nil, 0, false
	}
	end := bytes.IndexByte(data[i+1:], '"')
	if end < 0 {
		return nil, 0, false
	}
	s := data[i+1 : i+1+end]
	for _, c := range s {
		if c < 0x20 || c == '\\' {
			return nil, 0, false
		}
	}
	if !utf8.Valid(s) {
		return nil, 0, false
	}
	return s, i + 2 + end, true
}

// Space reports whether c is JSON whitespace.
func Space(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

// SkipSpace returns the index of the first byte at or after i that is not
// JSON whitespace.
func SkipSpace(data []byte, i int) int {
	for i < len(data) && Space(data[i]) {
		i++
	}
	return i
}
