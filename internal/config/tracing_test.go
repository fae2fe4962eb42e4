package config

import (
	"strings"
	"testing"
)

func TestTracingFromEnv(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		want    Tracing
		wantErr string // a part of the error; "" for none
	}{
		{"unset: off", nil, Tracing{}, ""},
		{"an endpoint: on, every request of a sampled parent",
			map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://jaeger:4318/"},
			Tracing{Endpoint: "http://jaeger:4318/v1/traces", Sampler: SamplerParentAlwaysOn, Ratio: 1, ServiceName: "seckill"}, ""},
		{"the traces endpoint as it is, 1%",
			map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "https://c:4318/t", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://x",
				"OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.01", "OTEL_SERVICE_NAME": "shop"},
			Tracing{Endpoint: "https://c:4318/t", Sampler: SamplerParentRatio, Ratio: 0.01, ServiceName: "shop"}, ""},
		{"disabled", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x", "OTEL_SDK_DISABLED": "true"}, Tracing{}, ""},
		{"exporter none", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x", "OTEL_TRACES_EXPORTER": "none"}, Tracing{}, ""},
		{"another exporter", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x", "OTEL_TRACES_EXPORTER": "zipkin"}, Tracing{}, "OTEL_TRACES_EXPORTER"},
		{"grpc", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, Tracing{}, "OTEL_EXPORTER_OTLP_PROTOCOL"},
		{"no scheme", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "jaeger:4318"}, Tracing{}, "http://"},
		{"unknown sampler", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x", "OTEL_TRACES_SAMPLER": "sometimes"}, Tracing{}, "OTEL_TRACES_SAMPLER"},
		{"ratio above 1", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x", "OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "2"}, Tracing{}, "OTEL_TRACES_SAMPLER_ARG"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tracingFromEnv(func(k string) string { return tt.env[k] })
			switch {
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("tracingFromEnv(%v) = %v; want an error naming %s", tt.env, err, tt.wantErr)
			case tt.wantErr == "" && err != nil:
				t.Fatalf("tracingFromEnv(%v) = %v", tt.env, err)
			case got != tt.want:
				t.Errorf("tracingFromEnv(%v) = %+v; want %+v", tt.env, got, tt.want)
			}
		})
	}
}
