package config

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"
)

// Events configures the order events' outbox and their relay to NATS
// JetStream (issue 51; docs/api.md, "Order events"). Off, nothing is
// written and no relay runs.
type Events struct {
	Enabled bool   `yaml:"enabled" default:"false" help:"write an event with every change of an order, in its transaction, and relay them to NATS JetStream"`
	NATSURL string `yaml:"nats_url" default:"nats://127.0.0.1:4222" help:"the NATS server(s) of the relay, comma-separated nats:// URLs"`
	Subject string `yaml:"subject" default:"seckill.orders" help:"subject prefix: an event of type t is published on <subject>.t; dot-separated tokens, no wildcards"`
	Stream  string `yaml:"stream" default:"SECKILL_ORDERS" help:"the JetStream stream, made or updated at the first publication to take <subject>.>"`
	// StreamMaxAge: the stream is the consumers' replay; the outbox only
	// holds what the stream has not acknowledged, plus retention.
	StreamMaxAge    time.Duration `yaml:"stream_max_age" default:"168h" valid:">=0" help:"the stream drops events older than this; 0: never"`
	DuplicateWindow time.Duration `yaml:"duplicate_window" default:"2m" valid:"1s..24h" help:"the stream drops a message whose event id it stored this recently: the relay's republications"`
	Batch           int           `yaml:"batch" default:"1024" valid:"1..10000" help:"events read, published and marked per round"`
	Interval        time.Duration `yaml:"interval" default:"100ms" valid:"10ms..1m" help:"the relay's wait when the outbox is empty, and a follower's between tries for the lease"`
	MaxBackoff      time.Duration `yaml:"max_backoff" default:"5s" valid:"10ms..5m" help:"the longest wait after a failed round (the broker down): the wait doubles from interval up to it"`
	PublishTimeout  time.Duration `yaml:"publish_timeout" default:"5s" valid:"10ms..1m" help:"one round's publications and their acknowledgements"`
	Retention       time.Duration `yaml:"retention" default:"1h" valid:">=0" help:"a published event is deleted from the outbox this long after; 0: at the next round"`
}

func (c Config) validateEvents() error {
	e := c.Events
	if !e.Enabled {
		return nil
	}
	for _, u := range strings.Split(e.NATSURL, ",") {
		p, err := url.Parse(strings.TrimSpace(u))
		if err != nil || (p.Scheme != "nats" && p.Scheme != "tls") || p.Host == "" {
			return fmt.Errorf("config: events.nats_url (SECKILL_EVENTS_NATS_URL) %q: want nats://host:port", u)
		}
	}
	if err := subjectTokens(e.Subject); err != nil {
		return fmt.Errorf("config: events.subject (SECKILL_EVENTS_SUBJECT) %q: %w", e.Subject, err)
	}
	if e.Stream == "" || strings.ContainsAny(e.Stream, ". *>\t\n/\\") {
		return fmt.Errorf("config: events.stream (SECKILL_EVENTS_STREAM) %q: want a name without spaces, dots, wildcards or slashes", e.Stream)
	}
	if e.MaxBackoff < e.Interval {
		return fmt.Errorf("config: events.max_backoff (%v) must not be shorter than events.interval (%v)", e.MaxBackoff, e.Interval)
	}
	if e.StreamMaxAge > 0 && e.StreamMaxAge < e.DuplicateWindow {
		// JetStream refuses a duplicate window longer than the max age.
		return fmt.Errorf("config: events.stream_max_age (%v) must be 0 or at least events.duplicate_window (%v)", e.StreamMaxAge, e.DuplicateWindow)
	}
	return nil
}

// subjectTokens checks a NATS subject prefix: dot-separated tokens, none
// empty, without wildcards or white space.
func subjectTokens(s string) error {
	if s == "" {
		return errors.New("empty")
	}
	for _, tok := range strings.Split(s, ".") {
		if tok == "" || strings.ContainsAny(tok, "*> \t\r\n") {
			return errors.New("want dot-separated tokens without wildcards or spaces")
		}
	}
	return nil
}
