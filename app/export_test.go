package app

import (
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/seckill/seckill/internal/config"
)

// ServeTraced is Serve tracing through a test's TracerProvider (its
// in-memory exporter) in place of the OTEL_* variables.
var ServeTraced = serve

// NewTracerProvider is the provider production builds for cfg's sampler,
// exporting each span to exp as it ends.
func NewTracerProvider(cfg config.Tracing, exp sdktrace.SpanExporter) *sdktrace.TracerProvider {
	return newProvider(cfg, sdktrace.WithSyncer(exp))
}
