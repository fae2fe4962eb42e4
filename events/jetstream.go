package events

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

var _ Publisher = (*JetStream)(nil)

// JetStream publishes to a NATS JetStream stream.
type JetStream struct {
	nc     *nats.Conn
	js     jetstream.JetStream
	stream StreamConfig
	ready  atomic.Bool // the stream was made or found since the last "no stream"
}

// StreamConfig is the stream the events go to: created when missing,
// updated to these subjects and limits otherwise (file storage).
type StreamConfig struct {
	Name      string
	Subject   string        // the events' subject prefix: the stream takes Subject.>
	MaxAge    time.Duration // events older are dropped from the stream; 0: kept
	Duplicate time.Duration // the duplicate window: a message id seen within it is dropped
}

// maxPending bounds the publications awaiting their acknowledgement:
// above events.batch's ceiling, so that a round never stalls on it.
const maxPending = 16384

// NewJetStream connects to url, reconnecting for ever while the server is
// away, and returns the publisher. The stream is made by the first
// Publish that finds it missing, so a broker down at start delays nothing
// else.
func NewJetStream(url string, stream StreamConfig) (*JetStream, error) {
	nc, err := nats.Connect(url, nats.Name("seckill event relay"), nats.RetryOnFailedConnect(true),
		nats.MaxReconnects(-1), nats.ReconnectWait(250*time.Millisecond))
	if err != nil {
		return nil, fmt.Errorf("events: connect %s: %w", url, err)
	}
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(maxPending))
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("events: %w", err)
	}
	return &JetStream{nc: nc, js: js, stream: stream}, nil
}

// Close drains nothing: what was not acknowledged is published again by
// the next relay.
func (j *JetStream) Close() { j.nc.Close() }

// Publish sends every message with its id as Nats-Msg-Id, then waits,
// until ctx ends, for each acknowledgement.
func (j *JetStream) Publish(ctx context.Context, msgs []Message) ([]error, error) {
	if err := j.ensureStream(ctx); err != nil {
		return nil, err
	}
	errs := make([]error, len(msgs))
	futs := make([]jetstream.PubAckFuture, len(msgs))
	for i, m := range msgs {
		futs[i], errs[i] = j.js.PublishMsgAsync(&nats.Msg{Subject: m.Subject, Data: m.Data}, jetstream.WithMsgID(m.ID))
	}
	for i, f := range futs {
		if f == nil {
			continue
		}
		select {
		case <-f.Ok():
		case err := <-f.Err():
			errs[i] = err
			if errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, nats.ErrNoResponders) {
				j.ready.Store(false)
			}
		case <-ctx.Done():
			errs[i] = fmt.Errorf("events: no acknowledgement: %w", ctx.Err())
		}
	}
	return errs, nil
}

// ensureStream makes or updates the stream once, and again after a
// publication found none.
func (j *JetStream) ensureStream(ctx context.Context) error {
	if j.ready.Load() {
		return nil
	}
	_, err := j.js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name: j.stream.Name, Subjects: []string{j.stream.Subject + ".>"}, Storage: jetstream.FileStorage,
		MaxAge: j.stream.MaxAge, Duplicates: j.stream.Duplicate,
	})
	if err != nil {
		return fmt.Errorf("events: stream %s: %w", j.stream.Name, err)
	}
	j.ready.Store(true)
	return nil
}

// Ping reports whether JetStream answers at url: nil once it does.
func Ping(ctx context.Context, url string) error {
	nc, err := nats.Connect(url, nats.Timeout(time.Second))
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	if _, err := js.AccountInfo(ctx); err != nil {
		return fmt.Errorf("jetstream: %w", err)
	}
	return nil
}
