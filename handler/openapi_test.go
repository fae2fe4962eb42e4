package handler_test

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
	"gopkg.in/yaml.v3"

	"github.com/seckill/seckill/handler"
)

// apiSpec is the part of handler/openapi.yaml the tests check answers against.
type apiSpec struct {
	raw   map[string]any
	doc   openAPIDoc
	codes map[string]bool // the ErrorCode enum
	paths []specPath
}

type openAPIDoc struct {
	OpenAPI    string                          `yaml:"openapi"`
	Paths      map[string]map[string]operation `yaml:"paths"`
	Components struct {
		Parameters map[string]parameter `yaml:"parameters"`
		Responses  map[string]response  `yaml:"responses"`
		Schemas    map[string]struct {
			Enum []string `yaml:"enum"`
		} `yaml:"schemas"`
		SecuritySchemes map[string]struct {
			Type   string `yaml:"type"`
			Scheme string `yaml:"scheme"`
		} `yaml:"securitySchemes"`
	} `yaml:"components"`
}

type operation struct {
	OperationID string                `yaml:"operationId"`
	Parameters  []parameter           `yaml:"parameters"`
	Responses   map[string]response   `yaml:"responses"`
	Security    []map[string][]string `yaml:"security"`
}

type parameter struct {
	Ref      string `yaml:"$ref"`
	Name     string `yaml:"name"`
	In       string `yaml:"in"`
	Required bool   `yaml:"required"`
}

type response struct {
	Ref     string         `yaml:"$ref"`
	Headers map[string]any `yaml:"headers"`
}

type specPath struct {
	template string
	re       *regexp.Regexp
}

var pathParam = regexp.MustCompile(`\{[^/}]+\}`)

// parseSpec parses an OpenAPI document and indexes its paths.
func parseSpec(t testing.TB, raw []byte) *apiSpec {
	t.Helper()
	s := &apiSpec{codes: map[string]bool{}}
	if err := yaml.Unmarshal(raw, &s.raw); err != nil {
		t.Fatalf("openapi.yaml: %v", err)
	}
	if err := yaml.Unmarshal(raw, &s.doc); err != nil {
		t.Fatalf("openapi.yaml: %v", err)
	}
	for _, c := range s.doc.Components.Schemas["ErrorCode"].Enum {
		s.codes[c] = true
	}
	for p := range s.doc.Paths {
		segs := strings.Split(p, "/")
		for i, seg := range segs {
			if pathParam.MatchString(seg) {
				segs[i] = "[^/]+"
			} else {
				segs[i] = regexp.QuoteMeta(seg)
			}
		}
		s.paths = append(s.paths, specPath{template: p, re: regexp.MustCompile("^" + strings.Join(segs, "/") + "$")})
	}
	return s
}

// match returns the documented path template a request path falls under.
func (s *apiSpec) match(path string) (string, bool) {
	path, _, _ = strings.Cut(path, "?")
	for _, p := range s.paths {
		if p.re.MatchString(path) {
			return p.template, true
		}
	}
	return "", false
}

// resolveResponse follows a response $ref into components.
func (s *apiSpec) resolveResponse(r response) (response, bool) {
	if r.Ref == "" {
		return r, true
	}
	name, ok := strings.CutPrefix(r.Ref, "#/components/responses/")
	if !ok {
		return response{}, false
	}
	c, ok := s.doc.Components.Responses[name]
	return c, ok
}

func (s *apiSpec) resolveParameter(p parameter) (parameter, bool) {
	if p.Ref == "" {
		return p, true
	}
	name, ok := strings.CutPrefix(p.Ref, "#/components/parameters/")
	if !ok {
		return parameter{}, false
	}
	c, ok := s.doc.Components.Parameters[name]
	return c, ok
}

// servedSpec returns the document as GET /openapi.yaml serves it.
func servedSpec(t testing.TB) []byte {
	t.Helper()
	h, err := handler.New(handler.Config{Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/openapi.yaml", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /openapi.yaml = %d; want 200", rec.Code)
	}
	if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "application/yaml") {
		t.Errorf("GET /openapi.yaml Content-Type = %q; want application/yaml", ct)
	}
	body, err := io.ReadAll(rec.Body)
	if err != nil {
		t.Fatal(err)
	}
	return body
}

func TestOpenAPIServedIsTheFile(t *testing.T) {
	t.Parallel()
	onDisk, err := os.ReadFile("openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got := servedSpec(t); string(got) != string(onDisk) {
		t.Errorf("GET /openapi.yaml serves %d bytes that differ from handler/openapi.yaml (%d bytes)", len(got), len(onDisk))
	}
}

// TestOpenAPIDocumentsEveryRoute walks the routes handler.New registers and
// requires each, with its method, in the document, and the reverse.
func TestOpenAPIDocumentsEveryRoute(t *testing.T) {
	t.Parallel()
	spec := parseSpec(t, servedSpec(t))
	if spec.doc.OpenAPI != "3.0.3" {
		t.Errorf("openapi = %q; want 3.0.3", spec.doc.OpenAPI)
	}

	// /metrics is mounted by app through Config.Extra; mount it the same way.
	h, err := handler.New(handler.Config{
		Log:   slog.New(slog.DiscardHandler),
		Extra: map[string]http.Handler{"/metrics": http.NotFoundHandler()},
	})
	if err != nil {
		t.Fatal(err)
	}
	engine, ok := h.(*gin.Engine)
	if !ok {
		t.Fatalf("handler.New returned %T; want *gin.Engine", h)
	}
	colon := regexp.MustCompile(`:([A-Za-z_]+)`)
	routes := map[string]bool{} // "METHOD /path/{id}"
	for _, r := range engine.Routes() {
		path := colon.ReplaceAllString(r.Path, "{$1}")
		routes[r.Method+" "+path] = true
		op, ok := spec.doc.Paths[path][strings.ToLower(r.Method)]
		if _, get := spec.doc.Paths[path]["get"]; !ok && r.Method == http.MethodHead && get {
			continue // every GET answers HEAD, as the document's description says
		}
		if !ok {
			t.Errorf("route %s %s is not documented in openapi.yaml (as %s %s)", r.Method, r.Path, strings.ToLower(r.Method), path)
			continue
		}
		if op.OperationID == "" {
			t.Errorf("%s %s: no operationId", r.Method, path)
		}
		// Every path parameter is declared as one.
		for _, m := range pathParam.FindAllString(path, -1) {
			name := strings.Trim(m, "{}")
			found := false
			for _, p := range op.Parameters {
				p, ok := spec.resolveParameter(p)
				if ok && p.In == "path" && p.Name == name && p.Required {
					found = true
				}
			}
			if !found {
				t.Errorf("%s %s: path parameter %q is not declared (in: path, required: true)", r.Method, path, name)
			}
		}
	}
	if len(routes) < 11 {
		t.Errorf("walked %d routes; want at least the 11 of routes.go", len(routes))
	}
	var documented []string
	for path, ops := range spec.doc.Paths {
		for method := range ops {
			documented = append(documented, strings.ToUpper(method)+" "+path)
		}
	}
	sort.Strings(documented)
	for _, d := range documented {
		if !routes[d] {
			t.Errorf("openapi.yaml documents %s, which handler.New does not route", d)
		}
	}
}

// TestOpenAPIContract checks what clients rely on beyond the route list:
// the error codes, admin security, Retry-After and that every $ref resolves.
func TestOpenAPIContract(t *testing.T) {
	t.Parallel()
	spec := parseSpec(t, servedSpec(t))

	for _, code := range []string{
		"invalid_request", "request_too_large", "unauthorized", "not_found", "sku_not_found",
		"method_not_allowed", "sold_out", "limit_exceeded", "sale_not_active",
		"idempotency_conflict", "busy", "unavailable", "outcome_unknown", "internal",
	} {
		if !spec.codes[code] {
			t.Errorf("ErrorCode enum lacks %q", code)
		}
	}

	if s := spec.doc.Components.SecuritySchemes["adminBearer"]; s.Type != "http" || s.Scheme != "bearer" {
		t.Errorf("securitySchemes.adminBearer = %+v; want type http, scheme bearer", s)
	}
	for path, ops := range spec.doc.Paths {
		for method, op := range ops {
			name := strings.ToUpper(method) + " " + path
			admin := strings.HasPrefix(path, "/admin/")
			secured := slices.ContainsFunc(op.Security, func(m map[string][]string) bool { _, ok := m["adminBearer"]; return ok })
			if admin != secured {
				t.Errorf("%s: security adminBearer declared = %v; want %v", name, secured, admin)
			}
			if _, ok := op.Responses["401"]; admin && !ok {
				t.Errorf("%s: no 401 response", name)
			}
			ok2xx := false
			for status, r := range op.Responses {
				if status == "default" {
					continue
				}
				n, err := strconv.Atoi(status)
				if err != nil || n < 100 || n > 599 {
					t.Errorf("%s: response key %q is not a status", name, status)
					continue
				}
				if n < 300 {
					ok2xx = true
				}
				r, ok := spec.resolveResponse(r)
				if !ok {
					t.Errorf("%s %s: response $ref does not resolve", name, status)
					continue
				}
				if _, ok := r.Headers["Retry-After"]; (n == 429 || (n == 503 && path != "/readyz")) && !ok {
					t.Errorf("%s %s: no Retry-After header", name, status)
				}
			}
			if !ok2xx {
				t.Errorf("%s: no 2xx response", name)
			}
		}
	}

	want := map[string][]string{
		"POST /api/v1/orders":           {"200", "201", "400", "404", "409", "413", "429", "503"},
		"PUT /admin/v1/skus/{id}/stock": {"200", "400", "401", "404", "413"},
		"GET /readyz":                   {"200", "503"},
	}
	for name, statuses := range want {
		method, path, _ := strings.Cut(name, " ")
		op := spec.doc.Paths[path][strings.ToLower(method)]
		for _, st := range statuses {
			if _, ok := op.Responses[st]; !ok {
				t.Errorf("%s: response %s not documented", name, st)
			}
		}
	}

	// Every local $ref points at something.
	var walk func(node any, at string)
	walk = func(node any, at string) {
		switch n := node.(type) {
		case map[string]any:
			for k, v := range n {
				if ref, ok := v.(string); ok && k == "$ref" {
					if !resolves(spec.raw, ref) {
						t.Errorf("%s: $ref %q does not resolve", at, ref)
					}
					continue
				}
				walk(v, at+"/"+k)
			}
		case []any:
			for i, v := range n {
				walk(v, at+"/"+strconv.Itoa(i))
			}
		}
	}
	walk(spec.raw, "#")
}

func resolves(root map[string]any, ref string) bool {
	rest, ok := strings.CutPrefix(ref, "#/")
	if !ok {
		return false
	}
	var node any = root
	for _, part := range strings.Split(rest, "/") {
		m, ok := node.(map[string]any)
		if !ok {
			return false
		}
		if node, ok = m[part]; !ok {
			return false
		}
	}
	return true
}
