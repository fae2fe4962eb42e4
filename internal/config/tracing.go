package config

import (
	"fmt"
	"strconv"
	"strings"
)

// Tracing is what the standard OpenTelemetry variables ask of traces
// (docs/configuration.md, "Traces"). They are not settings of the YAML
// file: every OpenTelemetry SDK reads them so, and so does the operator's
// platform. Off unless an OTLP endpoint is given.
type Tracing struct {
	// Endpoint is the OTLP/HTTP URL spans are posted to:
	// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT as it is, else
	// OTEL_EXPORTER_OTLP_ENDPOINT with /v1/traces; "" turns tracing off,
	// as do OTEL_SDK_DISABLED=true and OTEL_TRACES_EXPORTER=none.
	Endpoint string
	// Sampler is OTEL_TRACES_SAMPLER (parentbased_always_on by default),
	// Ratio its OTEL_TRACES_SAMPLER_ARG for the *traceidratio samplers
	// (1 by default).
	Sampler string
	Ratio   float64
	// ServiceName is OTEL_SERVICE_NAME, seckill by default.
	ServiceName string
}

// On reports whether traces are exported.
func (t Tracing) On() bool { return t.Endpoint != "" }

// The samplers OTEL_TRACES_SAMPLER may name.
const (
	SamplerAlwaysOn           = "always_on"
	SamplerAlwaysOff          = "always_off"
	SamplerRatio              = "traceidratio"
	SamplerParentAlwaysOn     = "parentbased_always_on"
	SamplerParentAlwaysOff    = "parentbased_always_off"
	SamplerParentRatio        = "parentbased_traceidratio"
	defaultTracingService     = "seckill"
	otlpHTTPProtocol          = "http/protobuf"
	otlpTracesPath            = "/v1/traces"
	tracingVariablesExplainer = "see docs/configuration.md#traces"
)

// TracingVariables are the OTEL_* variables the service reads itself;
// the OpenTelemetry SDK reads the exporter's others (headers, timeout,
// compression, certificates), OTEL_RESOURCE_ATTRIBUTES and OTEL_BSP_*
// from the process's environment.
var TracingVariables = []string{
	"OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER",
	"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
	"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
	"OTEL_TRACES_SAMPLER", "OTEL_TRACES_SAMPLER_ARG", "OTEL_SERVICE_NAME",
}

// tracingFromEnv reads Tracing through getenv. A value the service cannot
// honour (another exporter or protocol, an unknown sampler, a ratio
// outside [0, 1]) fails start-up naming its variable.
func tracingFromEnv(getenv func(string) string) (Tracing, error) {
	env := func(k string) string { return strings.TrimSpace(getenv(k)) }
	if strings.EqualFold(env("OTEL_SDK_DISABLED"), "true") {
		return Tracing{}, nil
	}
	switch exp := strings.ToLower(env("OTEL_TRACES_EXPORTER")); exp {
	case "", "otlp":
	case "none":
		return Tracing{}, nil
	default:
		return Tracing{}, fmt.Errorf("config: OTEL_TRACES_EXPORTER=%q: want otlp or none (%s)", exp, tracingVariablesExplainer)
	}
	t := Tracing{Sampler: SamplerParentAlwaysOn, Ratio: 1, ServiceName: defaultTracingService}
	t.Endpoint = env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
	if base := env("OTEL_EXPORTER_OTLP_ENDPOINT"); t.Endpoint == "" && base != "" {
		t.Endpoint = strings.TrimSuffix(base, "/") + otlpTracesPath
	}
	if t.Endpoint == "" {
		return Tracing{}, nil
	}
	if !strings.HasPrefix(t.Endpoint, "http://") && !strings.HasPrefix(t.Endpoint, "https://") {
		return Tracing{}, fmt.Errorf("config: the OTLP endpoint %q: want an http:// or https:// URL (%s)", t.Endpoint, tracingVariablesExplainer)
	}
	for _, k := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if p := env(k); p != "" && p != otlpHTTPProtocol {
			return Tracing{}, fmt.Errorf("config: %s=%q: this build exports %s only (%s)", k, p, otlpHTTPProtocol, tracingVariablesExplainer)
		}
	}
	if s := strings.ToLower(env("OTEL_TRACES_SAMPLER")); s != "" {
		switch s {
		case SamplerAlwaysOn, SamplerAlwaysOff, SamplerRatio, SamplerParentAlwaysOn, SamplerParentAlwaysOff, SamplerParentRatio:
			t.Sampler = s
		default:
			return Tracing{}, fmt.Errorf("config: OTEL_TRACES_SAMPLER=%q: want one of always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off, parentbased_traceidratio (%s)", s, tracingVariablesExplainer)
		}
	}
	if a := env("OTEL_TRACES_SAMPLER_ARG"); a != "" && (t.Sampler == SamplerRatio || t.Sampler == SamplerParentRatio) {
		r, err := strconv.ParseFloat(a, 64)
		if err != nil || r < 0 || r > 1 {
			return Tracing{}, fmt.Errorf("config: OTEL_TRACES_SAMPLER_ARG=%q: want a ratio from 0 to 1 (%s)", a, tracingVariablesExplainer)
		}
		t.Ratio = r
	}
	if n := env("OTEL_SERVICE_NAME"); n != "" {
		t.ServiceName = n
	}
	return t, nil
}
