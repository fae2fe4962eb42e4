package service_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/seckill/seckill/service"
)

// sentinels returns the text of every sentinel error the package's code
// declares (ErrX = errors.New("text")), by name, read from the source so
// that a new one cannot be missed.
func sentinels(t *testing.T) map[string]string {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.VAR {
				continue
			}
			for _, spec := range g.Specs {
				v := spec.(*ast.ValueSpec)
				for i, id := range v.Names {
					if !strings.HasPrefix(id.Name, "Err") || i >= len(v.Values) {
						continue
					}
					call, ok := v.Values[i].(*ast.CallExpr)
					if !ok || len(call.Args) != 1 {
						t.Errorf("%s: %s is not errors.New(text)", name, id.Name)
						continue
					}
					lit, ok := call.Args[0].(*ast.BasicLit)
					text, err := strconv.Unquote(lit.Value)
					if !ok || err != nil {
						t.Errorf("%s: %s is not errors.New(text)", name, id.Name)
						continue
					}
					out[id.Name] = text
				}
			}
		}
	}
	return out
}

// TestResults_EverySentinelOnce: the outcome table holds each sentinel
// error of the package exactly once, with a kind, a code and a message,
// and ResultOf counts it under its row's result.
func TestResults_EverySentinelOnce(t *testing.T) {
	t.Parallel()
	errs := sentinels(t)
	if len(errs) < 10 {
		t.Fatalf("found %d sentinels in the source; want them all (has the declaration changed?)", len(errs))
	}
	rows := map[string]int{}
	for _, r := range service.Results {
		rows[r.Err.Error()]++
		switch {
		case r.Kind < service.KindInvalid || r.Kind > service.KindInternal:
			t.Errorf("%v: kind %d is none of the kinds", r.Err, r.Kind)
		case r.Code == "":
			t.Errorf("%v: no code", r.Err)
		case r.Message == "" && r.Kind != service.KindInvalid:
			t.Errorf("%v: no message", r.Err)
		}
		want := r.Order
		if want == "" {
			want = service.Internal.Order
		}
		if got := service.ResultOf(r.Err, false); got != want {
			t.Errorf("ResultOf(%v) = %q; want %q", r.Err, got, want)
		}
	}
	for name, text := range errs {
		if rows[text] != 1 {
			t.Errorf("%s (%q) has %d rows in Results; want 1", name, text, rows[text])
		}
		delete(rows, text)
	}
	for text := range rows {
		t.Errorf("Results has a row for %q, which is no sentinel of the package", text)
	}
}
