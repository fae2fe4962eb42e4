package app_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"go/parser"
	gotoken "go/token"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/seckill/seckill/app"
	"github.com/seckill/seckill/internal/config"
	"github.com/seckill/seckill/internal/logging"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/internal/testenv/mariadb"
)

// One order's trace through the real HTTP stack (MariaDB with a replica,
// Redis, min_replicas 1), sampled as production samples 1% of requests
// (parentbased_traceidratio, here at ratio 0: only a balancer's sampled
// traceparent is traced). The first order's transaction waits on a row
// the test holds, so that three more orders queue behind it and share one
// batch: one commit round, linked from each of the three.
func TestTracing_AnOrdersTraceShowsWhereItsTimeWent(t *testing.T) {
	ctx := context.Background()
	set, err := mariadb.StartSet(ctx, t.TempDir(), 1, false)
	t.Cleanup(set.Stop)
	if err != nil {
		t.Fatal(err)
	}
	dbName := testenv.Name("tracing_")
	if err := set.Primary.Exec(ctx, "CREATE DATABASE "+dbName); err != nil {
		t.Fatal(err)
	}
	dsn := mariadb.AppDSN(set.Primary.Addr, dbName)
	migrate(t, dsn)

	cfg := instanceConfig(dsn, []string{testenv.RedisAddr()}, testenv.Name("test:tracing:")+":")
	cfg.MySQL.MaxOpenConns, cfg.MySQL.MaxIdleConns = 8, 8
	cfg.MySQL.Replicas = []string{mariadb.AppDSN(set.Replicas[0].Addr, "")}
	cfg.MySQL.MinReplicas = 1
	exp := tracetest.NewInMemoryExporter()
	tp := app.NewTracerProvider(config.Tracing{Sampler: config.SamplerParentRatio, Ratio: 0}, exp)
	var logs testenv.SyncBuffer
	url := serveTraced(t, cfg, &logs, tp)
	skuID := createSKU(t, url)

	// Order 1's transaction waits for the row; orders 2-4 queue meanwhile.
	held := testenv.HoldRow(t, testenv.DB(t, dsn), skuID)
	parents := make([]trace.SpanContext, 4)
	for i := range parents {
		parents[i] = balancerSpan(byte(i + 1))
	}
	statuses := make([]int, len(parents))
	bodies := make([]map[string]any, len(parents))
	var wg sync.WaitGroup
	order := func(i int) {
		wg.Go(func() {
			statuses[i], bodies[i] = call(t, http.MethodPost, url+"/api/v1/orders",
				fmt.Sprintf(`{"sku_id":%d,"user_id":"traced-%d","quantity":1}`, skuID, i), "traceparent", traceparent(parents[i]))
		})
	}
	order(0)
	waitFor(t, 10*time.Second, "order 1's transaction waiting for the held row", func() bool {
		var n int
		err := set.Primary.Query(ctx, "SELECT COUNT(*) FROM information_schema.processlist WHERE info LIKE 'UPDATE skus %'", &n)
		return err == nil && n > 0
	})
	waiting := time.Now()
	for i := 1; i < len(parents); i++ {
		order(i)
	}
	waitFor(t, 10*time.Second, "orders 2-4 queued behind order 1", func() bool {
		return strings.Contains(get(t, url+"/metrics"), fmt.Sprintf(`seckill_queue_depth{sku="%d"} 3`, skuID))
	})
	released := time.Now()
	if err := held.Rollback(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for i, s := range statuses {
		if s != http.StatusCreated {
			t.Fatalf("order %d = %d %v; want 201", i+1, s, bodies[i])
		}
	}

	// A refusal's body names its trace beside the request ID; an
	// unsampled request's names none.
	refusedParent := balancerSpan(9)
	status, refused := call(t, http.MethodPost, url+"/api/v1/orders", `{"sku_id":999999999,"user_id":"traced-9","quantity":1}`, "traceparent", traceparent(refusedParent))
	if e, _ := refused["error"].(map[string]any); status != http.StatusNotFound || e["trace_id"] != refusedParent.TraceID().String() || e["request_id"] == "" {
		t.Errorf("refused order with a sampled traceparent = %d %v; want 404 with trace_id %s beside its request_id", status, refused, refusedParent.TraceID())
	}
	status, unsampled := call(t, http.MethodPost, url+"/api/v1/orders", `{"sku_id":999999999,"user_id":"traced-10","quantity":1}`)
	if e, _ := unsampled["error"].(map[string]any); status != http.StatusNotFound || e["trace_id"] != nil {
		t.Errorf("refused order not sampled = %d %v; want 404 without trace_id", status, unsampled)
	}

	spans := exp.GetSpans()
	rounds := map[trace.SpanID]tracetest.SpanStub{}
	for _, s := range spans {
		if s.Name == "commit round" {
			rounds[s.SpanContext.SpanID()] = s
		}
	}
	answeredBy := make([]trace.SpanID, len(parents))
	for i, parent := range parents {
		req := only(t, spans, parent.TraceID(), "POST /api/v1/orders")
		if req.Parent.SpanID() != parent.SpanID() || !req.Parent.IsRemote() || req.SpanKind != trace.SpanKindServer {
			t.Errorf("order %d: request span's parent %v (remote %v), kind %v; want the balancer's span %v, a server span",
				i+1, req.Parent.SpanID(), req.Parent.IsRemote(), req.SpanKind, parent.SpanID())
		}
		if v := attr(req, "http.response.status_code"); v.AsInt64() != http.StatusCreated {
			t.Errorf("order %d: request span's status %v; want 201", i+1, v.String())
		}
		steps := map[string]tracetest.SpanStub{}
		for _, name := range []string{"queue wait", "lock wait", "commit", "replica confirmation"} {
			s := only(t, spans, parent.TraceID(), name)
			if s.Parent.SpanID() != req.SpanContext.SpanID() {
				t.Errorf("order %d: %q's parent is %v; want the request's span %v", i+1, name, s.Parent.SpanID(), req.SpanContext.SpanID())
			}
			if s.EndTime.Before(s.StartTime) || s.StartTime.Before(req.StartTime) || s.EndTime.After(req.EndTime) {
				t.Errorf("order %d: %q from %v to %v, outside its request's %v to %v", i+1, name, s.StartTime, s.EndTime, req.StartTime, req.EndTime)
			}
			steps[name] = s
		}
		commit := steps["commit"]
		if len(commit.Links) == 0 {
			t.Fatalf("order %d: its commit links to no commit round", i+1)
		}
		for _, l := range commit.Links {
			if _, ok := rounds[l.SpanContext.SpanID()]; !ok {
				t.Errorf("order %d: its commit links to %v, no commit round's span", i+1, l.SpanContext.SpanID())
			}
		}
		answeredBy[i] = commit.Links[len(commit.Links)-1].SpanContext.SpanID()
		if i == 0 {
			if lease := attr(steps["lock wait"], "seckill.lock.lease").AsString(); lease != "obtained" {
				t.Errorf("order 1: lock wait's lease %q; want obtained (the SKU's first batch)", lease)
			}
			if !commit.StartTime.Before(waiting) || !commit.EndTime.After(released) {
				t.Errorf("order 1: commit from %v to %v in its trace; want it to cover the wait for the held row, seen at %v, released at %v",
					commit.StartTime, commit.EndTime, waiting, released)
			}
		}
	}
	shared := answeredBy[1]
	if answeredBy[2] != shared || answeredBy[3] != shared || answeredBy[0] == shared {
		t.Fatalf("commit rounds that answered orders 1-4: %v; want orders 2-4 in one round, order 1 in another", answeredBy)
	}
	round := rounds[shared]
	if n := attr(round, "seckill.round.orders").AsInt64(); n != 3 {
		t.Errorf("the shared round carried %d orders; want 3", n)
	}
	linked := map[trace.TraceID]bool{}
	for _, l := range round.Links {
		linked[l.SpanContext.TraceID()] = true
	}
	for i := 1; i < 4; i++ {
		if !linked[parents[i].TraceID()] {
			t.Errorf("the shared round does not link back to order %d's request", i+1)
		}
	}

	// The access log line of each order carries its trace ID beside its
	// request ID.
	lines := accessLines(t, logs.String())
	for i, parent := range append(parents, refusedParent) {
		l, ok := lines[parent.TraceID().String()]
		if !ok || l["request_id"] == nil || l["request_id"] == "" {
			t.Errorf("request %d: access log line with trace_id %s = %v; want one, with its request_id", i+1, parent.TraceID(), l)
		}
	}
}

// TestTracing_TheOrderPathDoesNotImportTheSDK: only app (this room)
// imports the OpenTelemetry SDK; the order path declares ports of its own
// and imports no OpenTelemetry at all.
func TestTracing_TheOrderPathDoesNotImportTheSDK(t *testing.T) {
	for _, dir := range []string{"handler", "service", "engine", "repository", "locking", "wiring", "metrics", "internal/logging"} {
		files, err := filepath.Glob(filepath.Join("..", dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			parsed, err := parser.ParseFile(gotoken.NewFileSet(), f, nil, parser.ImportsOnly)
			if err != nil {
				t.Fatal(err)
			}
			for _, imp := range parsed.Imports {
				if strings.Contains(imp.Path.Value, "go.opentelemetry.io") {
					t.Errorf("%s imports %s: the order path reaches tracing through its own ports (handler.Tracer, engine.Tracer) only", f, imp.Path.Value)
				}
			}
		}
	}
}

// serveTraced serves cfg, tracing through tp, logging as JSON to logs.
func serveTraced(t *testing.T, cfg config.Config, logs io.Writer, tp *sdktrace.TracerProvider) string {
	t.Helper()
	return "http://" + serveWith(t, cfg, func(ctx context.Context, ready func(string)) error {
		return app.ServeTraced(ctx, cfg, logging.New(logs, "info", "json"), io.Discard, ready, tp)
	})
}

// balancerSpan is a sampled span of a balancer's, made up: trace and
// span IDs from n.
func balancerSpan(n byte) trace.SpanContext {
	var tid trace.TraceID
	var sid trace.SpanID
	for i := range tid {
		tid[i] = 0xa0 + n
	}
	for i := range sid {
		sid[i] = 0xb0 + n
	}
	return trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, Remote: true})
}

// traceparent is sc as the W3C header writes it.
func traceparent(sc trace.SpanContext) string {
	return fmt.Sprintf("00-%s-%s-01", sc.TraceID(), sc.SpanID())
}

// only returns the one span named name in trace id.
func only(t *testing.T, spans tracetest.SpanStubs, id trace.TraceID, name string) tracetest.SpanStub {
	t.Helper()
	var found []tracetest.SpanStub
	for _, s := range spans {
		if s.SpanContext.TraceID() == id && s.Name == name {
			found = append(found, s)
		}
	}
	if len(found) != 1 {
		t.Fatalf("trace %s has %d spans named %q; want 1", id, len(found), name)
	}
	return found[0]
}

func attr(s tracetest.SpanStub, key string) attribute.Value {
	for _, a := range s.Attributes {
		if string(a.Key) == key {
			return a.Value
		}
	}
	return attribute.Value{}
}

// accessLines returns the access log's lines ("msg":"request") by their
// trace_id.
func accessLines(t *testing.T, logs string) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	sc := bufio.NewScanner(strings.NewReader(logs))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) != nil || m["msg"] != "request" {
			continue
		}
		if id, ok := m["trace_id"].(string); ok {
			out[id] = m
		}
	}
	return out
}
