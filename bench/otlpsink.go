package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"time"
)

// otlpSink is the far end of -trace-ratio's spans: an OTLP/HTTP receiver
// in this process that reads each export whole and answers an empty
// ExportTraceServiceResponse (200, zero bytes of protobuf), so that the
// traced side pays what a service pays to build, batch, encode and post
// its spans, and not what a collector pays to keep them (that runs
// elsewhere in production). Exporting to a closed port instead would be
// cheaper than the truth: failed posts back off and the queue drops spans.
type otlpSink struct {
	srv            *http.Server
	url            string
	exports, bytes atomic.Int64
}

// startOTLPSink listens on a loopback port.
func startOTLPSink() (*otlpSink, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("otlp sink: %w", err)
	}
	s := &otlpSink{url: "http://" + ln.Addr().String()}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/traces", func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		s.exports.Add(1)
		s.bytes.Add(n)
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK)
	})
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

// env is the environment that traces a service at ratio into the sink.
func (s *otlpSink) env(ratio float64) []string {
	return []string{
		"OTEL_EXPORTER_OTLP_ENDPOINT=" + s.url,
		"OTEL_TRACES_SAMPLER=parentbased_traceidratio",
		fmt.Sprintf("OTEL_TRACES_SAMPLER_ARG=%g", ratio),
	}
}

func (s *otlpSink) String() string {
	return fmt.Sprintf("OTLP sink %s: %d exports, %d bytes of spans", s.url, s.exports.Load(), s.bytes.Load())
}

func (s *otlpSink) stop() { _ = s.srv.Close() }
