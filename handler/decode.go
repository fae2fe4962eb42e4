package handler

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"
)

// decode reads one JSON object of at most max bytes into dst, refusing
// unknown fields, trailing data and wrong types. It writes the 400 or 413
// itself and reports whether the caller may go on.
func decode(c *gin.Context, max int64, dst any) bool {
	body, err := io.ReadAll(http.MaxBytesReader(c.Writer, c.Request.Body, max))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			abort(c, http.StatusRequestEntityTooLarge, codeTooLarge, fmt.Sprintf("the body must be at most %d bytes", max))
			return false
		}
		abort(c, http.StatusBadRequest, codeInvalid, "could not read the body")
		return false
	}
	if msg := unmarshal(body, dst); msg != "" {
		abort(c, http.StatusBadRequest, codeInvalid, msg)
		return false
	}
	return true
}

// unmarshal returns a message for clients, or "" on success.
func unmarshal(body []byte, dst any) string {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		var typeErr *json.UnmarshalTypeError
		var syntaxErr *json.SyntaxError
		switch {
		case errors.Is(err, io.EOF):
			return "the body must be a JSON object"
		case errors.As(err, &typeErr):
			if typeErr.Field != "" {
				return fmt.Sprintf("field %q must be a %s", typeErr.Field, jsonType(typeErr.Type.String()))
			}
			return "the body must be a JSON object"
		case errors.As(err, &syntaxErr):
			return fmt.Sprintf("malformed JSON at byte %d", syntaxErr.Offset)
		default:
			// Unknown fields and the like: the decoder's text names the field.
			return "invalid JSON: " + trimJSONPrefix(err.Error())
		}
	}
	if dec.More() {
		return "the body must hold exactly one JSON object"
	}
	var rest json.RawMessage
	if err := dec.Decode(&rest); !errors.Is(err, io.EOF) {
		return "the body must hold exactly one JSON object"
	}
	return ""
}

func trimJSONPrefix(s string) string {
	const p = "json: "
	if len(s) > len(p) && s[:len(p)] == p {
		return s[len(p):]
	}
	return s
}

func jsonType(goType string) string {
	switch goType {
	case "int64", "*int64", "int", "*int":
		return "integer within range"
	case "string", "*string":
		return "string"
	}
	return "value of another type"
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
