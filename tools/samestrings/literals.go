package main

import (
	"go/ast"
	"go/parser"
	"go/token"
)

// literals are the string literals of a Go file as written (quotes and
// escapes kept), import paths and struct tags aside: those change with
// the layout, not with what optc says.
func literals(name, src string) ([]string, error) {
	f, err := parser.ParseFile(token.NewFileSet(), name, src, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	skip := map[*ast.BasicLit]bool{}
	var out []string
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.ImportSpec:
			skip[n.Path] = true
		case *ast.Field:
			if n.Tag != nil {
				skip[n.Tag] = true
			}
		case *ast.BasicLit:
			if n.Kind == token.STRING && !skip[n] {
				out = append(out, n.Value)
			}
		}
		return true
	})
	return out, nil
}
