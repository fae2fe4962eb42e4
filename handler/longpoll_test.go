package handler_test

import (
	"net/http"
	"testing"
	"time"
)

// awaitHeld waits until the stack holds n long-polls.
func (s *stack) awaitHeld(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for s.watch.Held() != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d long-polls held; want %d", s.watch.Held(), n)
		}
		time.Sleep(time.Millisecond) // polling a condition, not a synchronisation by time
	}
}

// TestLongPoll_Answers: GET of an order carries its ETag; If-None-Match
// naming it is 304 at once, and with Prefer: wait=N 304 after the wait
// (Preference-Applied) or 200 as soon as the order changes; a stale ETag
// is 200 at once; a malformed wait is ignored and a wait past 60 s is
// read as 60; never a 500.
func TestLongPoll_Answers(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	sku := s.createSKU(t, `{"name":"polled","stock":5,"per_user_limit":1}`)
	id := s.buy(t, sku, "u", 1, "")
	path := "/api/v1/orders/" + id
	r := s.get(t, path)
	tag := r.header.Get("ETag")
	if r.status != http.StatusOK || tag == "" || tag[0] != '"' {
		t.Fatalf("GET = %d, ETag %q; want 200 with a strong ETag", r.status, tag)
	}
	if again := s.get(t, path).header.Get("ETag"); again != tag {
		t.Errorf("ETag of an unchanged order = %q, then %q; want the same", tag, again)
	}
	for _, tc := range []struct {
		name    string
		headers []string
		status  int
		applied string
	}{
		{"matching", []string{"If-None-Match", tag}, http.StatusNotModified, ""},
		{"weak form", []string{"If-None-Match", "W/" + tag}, http.StatusNotModified, ""},
		{"in a list", []string{"If-None-Match", `"other-1", ` + tag}, http.StatusNotModified, ""},
		{"star is never held", []string{"If-None-Match", "*", "Prefer", "wait=30"}, http.StatusNotModified, ""},
		{"stale, with a wait: at once", []string{"If-None-Match", `"pending-0"`, "Prefer", "wait=30"}, http.StatusOK, ""},
		{"a wait without If-None-Match", []string{"Prefer", "wait=30"}, http.StatusOK, ""},
		{"wait=1", []string{"If-None-Match", tag, "Prefer", "wait=1"}, http.StatusNotModified, "wait=1"},
		{"wait among other preferences", []string{"If-None-Match", tag, "Prefer", "respond-async, wait=1"}, http.StatusNotModified, "wait=1"},
		{"the first wait counts", []string{"If-None-Match", tag, "Prefer", "wait=1", "Prefer", "wait=50"}, http.StatusNotModified, "wait=1"},
		{"wait=0", []string{"If-None-Match", tag, "Prefer", "wait=0"}, http.StatusNotModified, ""},
		{"wait=-1 ignored", []string{"If-None-Match", tag, "Prefer", "wait=-1"}, http.StatusNotModified, ""},
		{"wait=abc ignored", []string{"If-None-Match", tag, "Prefer", "wait=abc"}, http.StatusNotModified, ""},
		{"wait=1.5 ignored", []string{"If-None-Match", tag, "Prefer", "wait=1.5"}, http.StatusNotModified, ""},
		{"wait= ignored", []string{"If-None-Match", tag, "Prefer", "wait="}, http.StatusNotModified, ""},
	} {
		r := s.get(t, path, tc.headers...)
		if r.status != tc.status || r.header.Get("ETag") != tag || r.header.Get("Preference-Applied") != tc.applied {
			t.Errorf("%s: %v = %d, ETag %q, Preference-Applied %q; want %d, %q, %q",
				tc.name, tc.headers, r.status, r.header.Get("ETag"), r.header.Get("Preference-Applied"), tc.status, tag, tc.applied)
		}
	}

	// wait=1000 is read as 60: held until the order changes.
	answer := make(chan reply, 1)
	go func() { answer <- s.get(t, path, "If-None-Match", tag, "Prefer", "wait=1000") }()
	s.awaitHeld(t, 1)
	if c := s.call(t, http.MethodPost, path+"/cancel", ""); c.status != http.StatusOK {
		t.Fatalf("cancel = %d %s", c.status, c.body)
	}
	r = <-answer
	var o order
	if r.status == http.StatusOK {
		r.json(t, &o)
	}
	if r.status != http.StatusOK || o.Status != "cancelled" || r.header.Get("ETag") == tag || r.header.Get("Preference-Applied") != "wait=60" {
		t.Errorf("held poll after a cancel = %d %s, ETag %q, Preference-Applied %q; want 200 cancelled, a new ETag, wait=60",
			r.status, r.body, r.header.Get("ETag"), r.header.Get("Preference-Applied"))
	}
}

// TestLongPoll_Bound: past order.long_polls_max held polls, a poll is
// 503 unavailable with Retry-After; a read without a wait still answers.
func TestLongPoll_Bound(t *testing.T) {
	t.Parallel()
	s := newStack(t, func(o *stackOptions) { o.pollsMax = 1 })
	sku := s.createSKU(t, `{"name":"bounded","stock":5,"per_user_limit":1}`)
	first, second := "/api/v1/orders/"+s.buy(t, sku, "a", 1, ""), "/api/v1/orders/"+s.buy(t, sku, "b", 1, "")
	firstTag, secondTag := s.get(t, first).header.Get("ETag"), s.get(t, second).header.Get("ETag")

	answer := make(chan reply, 1)
	go func() { answer <- s.get(t, first, "If-None-Match", firstTag, "Prefer", "wait=30") }()
	s.awaitHeld(t, 1)
	if r := s.get(t, second, "If-None-Match", secondTag, "Prefer", "wait=30"); r.status != http.StatusServiceUnavailable || r.code != "unavailable" || r.header.Get("Retry-After") == "" {
		t.Errorf("a poll past the bound = %d %q, Retry-After %q; want 503 unavailable with Retry-After", r.status, r.code, r.header.Get("Retry-After"))
	}
	if r := s.get(t, second, "If-None-Match", secondTag); r.status != http.StatusNotModified {
		t.Errorf("a read without a wait past the bound = %d; want 304", r.status)
	}
	if c := s.call(t, http.MethodPost, first+"/cancel", ""); c.status != http.StatusOK {
		t.Fatalf("cancel = %d %s", c.status, c.body)
	}
	if r := <-answer; r.status != http.StatusOK {
		t.Errorf("the held poll after a cancel = %d; want 200", r.status)
	}
	s.awaitHeld(t, 0)
}
