package app

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/seckill/seckill/engine"
	"github.com/seckill/seckill/handler"
	"github.com/seckill/seckill/internal/config"
	"github.com/seckill/seckill/internal/logging"
	"github.com/seckill/seckill/service"
)

// The one room that imports the OpenTelemetry SDK. The handler and the
// engine declare what they record (handler.Tracer, engine.Tracer) and
// this file fills both: a request's server span, continuing the W3C
// traceparent of the balancer; the steps of each traced order (queue
// wait, lock wait, commit, replica confirmation) as its children, drawn
// after the fact from the times the engine kept; and one span per
// transaction ("commit round"), linked from the commit step of each
// traced order it carried and linking back to their requests.
// docs/operations.md reads one order's trace.

// Span names, as the trace backend lists them.
const (
	spanQueue    = "queue wait"
	spanLock     = "lock wait"
	spanCommit   = "commit"
	spanReplicas = "replica confirmation"
	spanRound    = "commit round"
)

// tracing is the service's tracer, nil when tracing is off.
type tracing struct {
	tracer trace.Tracer
	prop   propagation.TraceContext
}

// openTracing starts tracing as cfg.Tracing says, or with tp when it is
// not nil (a test's in-memory exporter); nil when tracing is off. The
// provider flushes and stops among the closers.
func openTracing(ctx context.Context, cfg config.Tracing, tp *sdktrace.TracerProvider, log *slog.Logger, cl *closers) (*tracing, error) {
	if tp == nil {
		if !cfg.On() {
			return nil, nil
		}
		exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(cfg.Endpoint))
		if err != nil {
			return nil, fmt.Errorf("tracing: the OTLP exporter to %s: %w", cfg.Endpoint, err)
		}
		res, err := resource.New(ctx, resource.WithFromEnv(), resource.WithTelemetrySDK(),
			resource.WithAttributes(attribute.String("service.name", cfg.ServiceName)))
		if err != nil {
			return nil, fmt.Errorf("tracing: resource: %w", err)
		}
		// Batched: a span ended is queued, never sent on the request's
		// path; a full queue drops spans rather than wait.
		tp = newProvider(cfg, sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
		otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { log.Warn("tracing: exporting spans failed", "err", err) }))
		log.Info("tracing", "endpoint", cfg.Endpoint, "sampler", cfg.Sampler, "ratio", cfg.Ratio, "service", cfg.ServiceName)
	}
	cl.add(func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return tp.Shutdown(ctx) // flushes the spans still queued
	})
	return &tracing{tracer: tp.Tracer("github.com/seckill/seckill")}, nil
}

// newProvider is the tracer provider of cfg's sampler (a round linked to
// a traced order is recorded whatever it says) with opts.
func newProvider(cfg config.Tracing, opts ...sdktrace.TracerProviderOption) *sdktrace.TracerProvider {
	return sdktrace.NewTracerProvider(append(opts, sdktrace.WithSampler(linkedSampler{sampler(cfg)}))...)
}

// sampler is the sampler cfg names.
func sampler(cfg config.Tracing) sdktrace.Sampler {
	switch cfg.Sampler {
	case config.SamplerAlwaysOn:
		return sdktrace.AlwaysSample()
	case config.SamplerAlwaysOff:
		return sdktrace.NeverSample()
	case config.SamplerRatio:
		return sdktrace.TraceIDRatioBased(cfg.Ratio)
	case config.SamplerParentAlwaysOff:
		return sdktrace.ParentBased(sdktrace.NeverSample())
	case config.SamplerParentRatio:
		return sdktrace.ParentBased(sdktrace.TraceIDRatioBased(cfg.Ratio))
	}
	return sdktrace.ParentBased(sdktrace.AlwaysSample())
}

// linkedSampler records a root span linked to a recorded span (a commit
// round carrying a traced order) whatever its base says: a round is begun
// only for traced orders, and their links would point at nothing.
type linkedSampler struct{ base sdktrace.Sampler }

func (s linkedSampler) ShouldSample(p sdktrace.SamplingParameters) sdktrace.SamplingResult {
	if !trace.SpanContextFromContext(p.ParentContext).IsValid() {
		for _, l := range p.Links {
			if l.SpanContext.IsSampled() {
				return sdktrace.SamplingResult{Decision: sdktrace.RecordAndSample}
			}
		}
	}
	return s.base.ShouldSample(p)
}

func (s linkedSampler) Description() string {
	return "LinkedSampler{" + s.base.Description() + "}"
}

// requests is t as the handler's tracer; nil when tracing is off.
func (t *tracing) requests() handler.Tracer {
	if t == nil {
		return nil
	}
	return t
}

// orders is t as the engine's tracer; nil when tracing is off.
func (t *tracing) orders() engine.Tracer {
	if t == nil {
		return nil
	}
	return t
}

// Start implements handler.Tracer.
func (t *tracing) Start(ctx context.Context, method, route string, header http.Header) (context.Context, handler.Span) {
	parent := t.prop.Extract(ctx, propagation.HeaderCarrier(header))
	traced, span := t.tracer.Start(parent, method+" "+route, trace.WithSpanKind(trace.SpanKindServer))
	if !span.IsRecording() {
		return ctx, unrecorded{}
	}
	request, _ := logging.IDs(ctx)
	span.SetAttributes(
		attribute.String("http.request.method", method),
		attribute.String("http.route", route),
		attribute.String("seckill.request_id", request),
	)
	return traced, requestSpan{span: span, id: span.SpanContext().TraceID().String()}
}

// unrecorded is the span of a request not sampled.
type unrecorded struct{}

func (unrecorded) TraceID() string { return "" }
func (unrecorded) End(int, string) {}

type requestSpan struct {
	span trace.Span
	id   string
}

func (s requestSpan) TraceID() string { return s.id }

func (s requestSpan) End(status int, code string) {
	s.span.SetAttributes(attribute.Int("http.response.status_code", status))
	if code != "" {
		s.span.SetAttributes(attribute.String("seckill.error_code", code))
	}
	if status >= 500 {
		s.span.SetStatus(codes.Error, strconv.Itoa(status)+" "+code)
	}
	s.span.End()
}

// Order implements engine.Tracer: the order is traced when its request's
// span is recorded.
func (t *tracing) Order(ctx context.Context) engine.OrderTrace {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return nil
	}
	sc := span.SpanContext()
	return &orderTrace{t: t, sc: sc, parent: trace.ContextWithSpanContext(context.Background(), sc)}
}

// orderTrace draws a traced order's steps as children of its request's
// span.
type orderTrace struct {
	t      *tracing
	sc     trace.SpanContext // the request's span
	parent context.Context   // carrying sc
}

func (o *orderTrace) Record(s engine.Step) {
	opts := []trace.SpanStartOption{trace.WithTimestamp(s.From)}
	var name string
	switch s.Kind {
	case engine.StepQueue:
		name = spanQueue
	case engine.StepLock:
		name = spanLock
		opts = append(opts, trace.WithAttributes(attribute.String("seckill.lock.lease", s.Lease), attribute.Int("seckill.batch.orders", s.Batch)))
	case engine.StepCommit:
		name = spanCommit
		opts = append(opts, trace.WithAttributes(attribute.Int("seckill.batch.orders", s.Batch), attribute.Int("seckill.commit.transactions", len(s.Rounds))))
		for i, r := range s.Rounds {
			if rs, ok := r.(*roundSpan); ok {
				opts = append(opts, trace.WithLinks(trace.Link{SpanContext: rs.span.SpanContext(),
					Attributes: []attribute.KeyValue{attribute.Bool("seckill.commit.answered", i == len(s.Rounds)-1)}}))
			}
		}
	case engine.StepReplicas:
		name = spanReplicas
	default:
		return
	}
	_, span := o.t.tracer.Start(o.parent, name, opts...)
	if s.Err != nil {
		span.SetAttributes(attribute.String("seckill.result", service.ResultOf(s.Err, false)))
		if k := service.Refusal(s.Err).Kind; k == service.KindUnavailable || k == service.KindInternal {
			span.SetStatus(codes.Error, s.Err.Error())
		}
	}
	span.End(trace.WithTimestamp(s.To))
}

// Round implements engine.Tracer: the span of one transaction, linking
// to the requests of the traced orders it carries.
func (t *tracing) Round(traced []engine.OrderTrace, batches, orders int, shared bool) engine.Round {
	links := make([]trace.Link, 0, len(traced))
	for _, o := range traced {
		if ot, ok := o.(*orderTrace); ok {
			links = append(links, trace.Link{SpanContext: ot.sc})
		}
	}
	_, span := t.tracer.Start(context.Background(), spanRound, trace.WithLinks(links...), trace.WithAttributes(
		attribute.Int("seckill.round.batches", batches),
		attribute.Int("seckill.round.orders", orders),
		attribute.Bool("seckill.round.shared", shared),
	))
	return &roundSpan{span: span}
}

type roundSpan struct{ span trace.Span }

func (r *roundSpan) End(err error) {
	if err != nil {
		r.span.SetStatus(codes.Error, err.Error())
	}
	r.span.End()
}
