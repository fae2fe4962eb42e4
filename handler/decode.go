package handler

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/gin-gonic/gin"
)

// decode reads one JSON object of at most max bytes into dst, refusing a
// content type other than JSON (415; a body without one is read as JSON),
// unknown fields, trailing data and wrong types (400), and a larger body
// (413). It writes the error itself and reports whether the caller may go on.
func decode(c *gin.Context, max int64, dst any) bool {
	body, ok := readBody(c, max)
	if !ok {
		return false
	}
	if msg := unmarshal(body, dst); msg != "" {
		abort(c, http.StatusBadRequest, codeInvalid, msg)
		return false
	}
	return true
}

// required answers 400 naming field when the body left it out (present
// false), and reports whether the caller may go on.
func required(c *gin.Context, field string, present bool) bool {
	if !present {
		abort(c, http.StatusBadRequest, codeInvalid, `field "`+field+`" is required`)
	}
	return present
}

// readBody reads a JSON body of at most max bytes, writing the 413, 415
// or 400 itself.
func readBody(c *gin.Context, max int64) ([]byte, bool) {
	if ct := c.Request.Header.Get("Content-Type"); ct != "" && !jsonContent(ct) {
		abort(c, http.StatusUnsupportedMediaType, codeUnsupportedMedia, "send the body as JSON with Content-Type: application/json")
		return nil, false
	}
	var body []byte
	var err error
	if n := c.Request.ContentLength; n >= 0 && n <= max {
		// The usual order: its length is known and net/http's reader stops
		// there, so the body is read into a slice of exactly its size (not
		// io.ReadAll's 512 bytes and a MaxBytesReader, per request).
		body = make([]byte, n)
		_, err = io.ReadFull(c.Request.Body, body)
	} else {
		body, err = io.ReadAll(http.MaxBytesReader(c.Writer, c.Request.Body, max))
	}
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			abort(c, http.StatusRequestEntityTooLarge, codeTooLarge, fmt.Sprintf("the body must be at most %d bytes", max))
			return nil, false
		}
		abort(c, http.StatusBadRequest, codeInvalid, "could not read the body")
		return nil, false
	}
	return body, true
}

// jsonContent reports whether a Content-Type names JSON: application/json
// or a structured +json type, with any parameters (charset=utf-8).
func jsonContent(ct string) bool {
	if ct == "application/json" { // what mime.ParseMediaType returns it as, without its map
		return true
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return false
	}
	return mt == "application/json" || (strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json"))
}

// unmarshal returns a message for clients, or "" on success. Every message
// about broken JSON starts "the body is not valid JSON".
func unmarshal(body []byte, dst any) string {
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	if len(trimmed) == 0 {
		return "the body is empty; send one JSON object"
	}
	if trimmed[0] != '{' {
		if json.Valid(trimmed) {
			return "the body must be a JSON object, not " + jsonKind(trimmed[0])
		}
		return "the body is not valid JSON: " + syntaxAt(body)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		var (
			typeErr   *json.UnmarshalTypeError
			syntaxErr *json.SyntaxError
			timeErr   *time.ParseError
		)
		switch {
		case errors.As(err, &syntaxErr), errors.Is(err, io.ErrUnexpectedEOF):
			return "the body is not valid JSON: " + syntaxAt(body)
		case errors.As(err, &typeErr) && typeErr.Field != "":
			return fmt.Sprintf("field %q must be %s", typeErr.Field, fieldWant(dst, typeErr.Field))
		case errors.As(err, &timeErr):
			return fmt.Sprintf(`times must be RFC 3339 strings such as "2030-01-01T10:00:00Z", or null (got %q)`, timeErr.Value)
		case strings.HasPrefix(err.Error(), "Time.UnmarshalJSON"): // a number or a bool where a time goes
			return `times must be RFC 3339 strings such as "2030-01-01T10:00:00Z", or null`
		case strings.HasPrefix(err.Error(), "json: unknown field "):
			name := strings.TrimPrefix(err.Error(), "json: unknown field ")
			return fmt.Sprintf("field %s is not known; the fields are %s", name, strings.Join(fieldNames(dst), ", "))
		default:
			return "the body is not valid JSON: " + trimJSONPrefix(err.Error())
		}
	}
	var rest json.RawMessage
	if err := dec.Decode(&rest); !errors.Is(err, io.EOF) {
		return "the body must hold exactly one JSON object, with nothing after it"
	}
	if key, dup := duplicateKey(body); dup {
		return fmt.Sprintf("field %q is given more than once; send each field once", key)
	}
	return ""
}

// duplicateKey reports the first member of an object of data (a valid
// JSON text) whose key, unescaped and case-folded, an earlier member of
// the same object has. Decoders differ on such a body (encoding/json keeps
// the last member and matches keys without regard to case, others keep
// the first or refuse), so it is refused whatever decoder reads the body.
func duplicateKey(data []byte) (string, bool) {
	if !keysMayRepeat(data) {
		return "", false
	}
	return duplicateKeyWalk(data)
}

// keysMayRepeat reports whether two keys of data (a valid JSON text), in
// whatever objects, might be one key to encoding/json. It says false only
// when every key is plain ASCII, unescaped, and no two are equal but for
// case: true of nearly every body, found in one pass over its bytes
// without allocating, so the token walk of duplicateKeyWalk runs only when
// a key repeats somewhere (perhaps in two objects) or is spelled unusually.
// In valid JSON a string followed by a colon is a key.
func keysMayRepeat(data []byte) bool {
	var keys [16][]byte
	n := 0
	for i := 0; i < len(data); i++ {
		if data[i] != '"' {
			continue
		}
		plain, end := true, i+1 // end: the closing quote
		for ; end < len(data) && data[end] != '"'; end++ {
			switch {
			case data[end] == '\\':
				plain = false
				end++ // the escaped byte, which may be a quote
			case data[end] >= utf8.RuneSelf:
				plain = false
			}
		}
		s := data[i+1 : min(end, len(data))]
		i = end
		if !followedByColon(data[min(end+1, len(data)):]) {
			continue // a value
		}
		if !plain || n == len(keys) {
			return true
		}
		for _, k := range keys[:n] {
			if bytes.EqualFold(k, s) {
				return true
			}
		}
		keys[n], n = s, n+1
	}
	return false
}

// followedByColon reports whether rest starts with a colon after JSON's
// white space.
func followedByColon(rest []byte) bool {
	rest = bytes.TrimLeft(rest, " \t\r\n")
	return len(rest) > 0 && rest[0] == ':'
}

// duplicateKeyWalk is duplicateKey by encoding/json's tokens.
func duplicateKeyWalk(data []byte) (string, bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber() // numbers stay text: nothing to parse
	type object struct {
		keys      map[string]bool
		expectKey bool
	}
	var stack []*object       // the objects open around the next token; nil for an array
	for range len(data) + 1 { // bounded: every token takes at least a byte
		tok, err := dec.Token()
		if err != nil {
			return "", false // io.EOF at the end; the caller's decode judged the rest
		}
		var top *object
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && top.expectKey {
			if d, ok := tok.(json.Delim); ok && d == '}' {
				stack = stack[:len(stack)-1]
				continue
			}
			key, _ := tok.(string)
			folded := foldKey(key)
			if top.keys[folded] {
				return key, true
			}
			top.keys[folded] = true
			top.expectKey = false
			continue
		}
		if top != nil {
			top.expectKey = true // this token is a member's value (or opens it)
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &object{keys: map[string]bool{}, expectKey: true})
		case json.Delim('['):
			stack = append(stack, nil)
		case json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
	}
	return "", false
}

// foldKey maps every key that encoding/json would match to the same field
// (bytes.EqualFold: Unicode simple case folding) to one string.
func foldKey(s string) string {
	b := make([]rune, 0, len(s))
	for _, r := range s {
		least := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			least = min(least, f)
		}
		b = append(b, least)
	}
	return string(b)
}

// syntaxAt describes where body stops being JSON.
func syntaxAt(body []byte) string {
	var v any
	err := json.Unmarshal(body, &v)
	var syntaxErr *json.SyntaxError
	if errors.As(err, &syntaxErr) {
		if syntaxErr.Offset >= int64(len(body)) {
			return "it ends early"
		}
		return fmt.Sprintf("%s (at byte %d)", trimJSONPrefix(syntaxErr.Error()), syntaxErr.Offset)
	}
	return "it ends early"
}

func jsonKind(first byte) string {
	switch first {
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 'n':
		return "null"
	case 't', 'f':
		return "a boolean"
	}
	return "a number"
}

func trimJSONPrefix(s string) string {
	return strings.TrimPrefix(s, "json: ")
}

// fieldRanges names what each body field accepts, with its range, for the
// message of a value of the wrong type or out of range.
var fieldRanges = map[string]string{
	"sku_id":         "an integer from 1 to 9223372036854775807",
	"quantity":       "an integer from 1 to 1073741824",
	"per_user_limit": "an integer from 1 to 1073741824",
	"stock":          "an integer from 0 to 1099511627776",
	"user_id":        "a string",
	"name":           "a string",
	"starts_at":      `an RFC 3339 time such as "2030-01-01T10:00:00Z", or null`,
	"ends_at":        `an RFC 3339 time such as "2030-01-01T10:00:00Z", or null`,
}

// fieldWant returns what field accepts: its documented range, or its JSON type.
func fieldWant(dst any, field string) string {
	if want, ok := fieldRanges[field]; ok {
		return want
	}
	t := reflect.TypeOf(dst)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() == reflect.Struct {
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name != field {
				continue
			}
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			switch ft.Kind() {
			case reflect.Int, reflect.Int32, reflect.Int64:
				return "an integer"
			case reflect.String:
				return "a string"
			case reflect.Bool:
				return "true or false"
			}
		}
	}
	return "of another type"
}

// fieldNames lists the JSON fields of dst's struct type.
func fieldNames(dst any) []string {
	t := reflect.TypeOf(dst)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	var names []string
	if t.Kind() != reflect.Struct {
		return names
	}
	for i := 0; i < t.NumField(); i++ {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name != "" && name != "-" {
			names = append(names, name)
		}
	}
	return names
}

// pathID parses a positive integer path parameter, writing the 400.
func pathID(c *gin.Context, name string) (int64, bool) {
	id, err := strconv.ParseInt(c.Param(name), 10, 64)
	if err != nil || id < 1 {
		abort(c, http.StatusBadRequest, codeInvalid, name+" must be a positive integer")
		return 0, false
	}
	return id, true
}
