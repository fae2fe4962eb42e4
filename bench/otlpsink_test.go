package main

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// TestOTLPSink_TheExporterTakesItsAnswerForASuccess: the service's own
// exporter posts to the sink and hears success, so the traced side does
// the whole work of exporting, with no retries nor dropped spans.
func TestOTLPSink_TheExporterTakesItsAnswerForASuccess(t *testing.T) {
	sink, err := startOTLPSink()
	if err != nil {
		t.Fatal(err)
	}
	defer sink.stop()
	ctx := context.Background()
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(sink.url+"/v1/traces"), otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: false}))
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp))
	for range 10 {
		_, span := tp.Tracer("bench").Start(ctx, "order")
		span.End()
	}
	if err := tp.ForceFlush(ctx); err != nil {
		t.Fatalf("exporting to the sink: %v", err)
	}
	if err := tp.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if sink.exports.Load() == 0 || sink.bytes.Load() == 0 {
		t.Errorf("%s; want the spans posted", sink)
	}
}
