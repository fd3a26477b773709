package cli

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// Every error opx wraps it wraps with %w, so errors.Is and errors.As see through it (a
// context's cancellation, a missing file, a store's busy error): fmt.Errorf never formats an
// error with %v or %s. An argument is taken for an error by its name (err, or a name ending
// in err/Err) or as context.Cause(…) or X.Err(); go vet then holds %w to real errors.
func TestErrorsAreWrapped(t *testing.T) {
	if bad := unwrapped(t, "x.go", `package x
func f(err error) error { return fmt.Errorf("reading %s: %v", "a", err) }`); len(bad) != 1 {
		t.Fatalf("the check does not see a %%v of an error: %v", bad)
	}
	for _, dir := range []string{"../../cmd", "../../internal", "../../scripts"} {
		filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
				return err
			}
			for _, b := range unwrapped(t, p, nil) {
				t.Errorf("%s: an error formatted with %%v or %%s, not wrapped with %%w", b)
			}
			return nil
		})
	}
}

// unwrapped are the places in a Go file (src, else read from path) where fmt.Errorf
// formats an error-named argument with %v or %s.
func unwrapped(t *testing.T, path string, src any) []string {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, src, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	ast.Inspect(f, func(n ast.Node) bool {
		c, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		sel, ok := c.Fun.(*ast.SelectorExpr)
		if !ok || sel.Sel.Name != "Errorf" || len(c.Args) < 2 {
			return true
		}
		lit, ok := c.Args[0].(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING {
			return true
		}
		verbs := formatVerbs(lit.Value)
		for i, a := range c.Args[1:] {
			if i < len(verbs) && (verbs[i] == 'v' || verbs[i] == 's') && errorNamed(a) {
				out = append(out, fset.Position(a.Pos()).String())
			}
		}
		return true
	})
	return out
}

// formatVerbs are a format string's verbs in order (%% is none).
func formatVerbs(format string) []byte {
	var out []byte
	for i := 0; i < len(format); i++ {
		if format[i] != '%' {
			continue
		}
		i++
		for i < len(format) && strings.ContainsRune("+-# 0123456789.*[]", rune(format[i])) {
			i++
		}
		if i < len(format) && format[i] != '%' {
			out = append(out, format[i])
		}
	}
	return out
}

// errorNamed is whether an argument is an error by its name: err or a name ending in
// err, context.Cause(…), X.Err().
func errorNamed(e ast.Expr) bool {
	switch x := e.(type) {
	case *ast.Ident:
		n := strings.ToLower(x.Name)
		return strings.HasSuffix(n, "err")
	case *ast.CallExpr:
		if sel, ok := x.Fun.(*ast.SelectorExpr); ok {
			if id, ok := sel.X.(*ast.Ident); ok && id.Name == "context" && sel.Sel.Name == "Cause" {
				return true
			}
			return sel.Sel.Name == "Err" && len(x.Args) == 0
		}
	}
	return false
}
