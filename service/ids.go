package service

import (
	"unicode"
	"unicode/utf8"
)

// IDProblem says why s cannot name a buyer or an idempotency key, or ""
// when it can. The database compares ids byte for byte, as Go does; an id
// that differs from another only by white space at either end, or that
// holds control characters or bytes that are not UTF-8, is refused rather
// than stored, so that no layer (a collation, a proxy, a log) can take it
// for another.
func IDProblem(s string) string {
	if s == "" {
		return "must not be empty"
	}
	if !utf8.ValidString(s) {
		return "must be UTF-8"
	}
	first, _ := utf8.DecodeRuneInString(s)
	last, _ := utf8.DecodeLastRuneInString(s)
	if unicode.IsSpace(first) || unicode.IsSpace(last) {
		return "must not begin or end with white space"
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return "must not contain control characters"
		}
	}
	return ""
}
