package lock_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadmeExampleUsesTheAPI: README.md's first Go example parses as
// the body of a function, and every lock.Name it calls is exported by
// this package, so a rename cannot leave the README behind.
func TestReadmeExampleUsesTheAPI(t *testing.T) {
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "```go\n")
	code, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatal("README.md has no Go example")
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "README.md", "package p\nfunc example() error {\n"+code+"return nil\n}\n", 0)
	if err != nil {
		t.Fatalf("README.md's first example does not parse: %v", err)
	}
	exported := map[string]bool{}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := parser.ParseFile(token.NewFileSet(), name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for n, obj := range src.Scope.Objects {
			if ast.IsExported(n) && obj != nil {
				exported[n] = true
			}
		}
	}
	var used []string
	ast.Inspect(f, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok {
			if id, ok := sel.X.(*ast.Ident); ok && id.Name == "lock" {
				used = append(used, sel.Sel.Name)
			}
		}
		return true
	})
	if len(used) == 0 {
		t.Fatal("README.md's first example calls nothing of package lock")
	}
	for _, name := range used {
		if !exported[name] {
			t.Errorf("README.md's first example uses lock.%s, which package lock does not export", name)
		}
	}
}
