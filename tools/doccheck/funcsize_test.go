package doccheck

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"github.com/optc-dev/optc/tools/testenv"
)

// Function size: no function outside tests is longer than maxFuncLines
// or has a cyclomatic complexity above maxComplexity (gocyclo's count: 1,
// plus one per if, for, case, select case, && and ||). A long function
// reads as a short narrative of named steps instead.
const (
	maxFuncLines  = 120
	maxComplexity = 40
)

func TestFunctionSize(t *testing.T) {
	root := testenv.RepoRoot()
	fset := token.NewFileSet()
	over := map[string]string{}
	funcs := 0
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "node_modules" || d.Name() == "onnxpb") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, 0)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			fd, ok := decl.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			funcs++
			lines := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1
			cc := complexity(fd)
			if lines > maxFuncLines || cc > maxComplexity {
				rel, _ := filepath.Rel(root, p)
				over[funcName(f.Name.Name, fd)] = fmt.Sprintf("%s: %d lines, complexity %d", filepath.ToSlash(rel), lines, cc)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for name, what := range over {
		t.Errorf("%s (%s) is over %d lines or complexity %d: split it into named steps", name, what, maxFuncLines, maxComplexity)
	}
	if funcs < 1000 {
		t.Fatalf("found only %d functions under %s", funcs, root)
	}
}

func funcName(pkg string, fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return pkg + "." + fd.Name.Name
	}
	typ := fd.Recv.List[0].Type
	if s, ok := typ.(*ast.StarExpr); ok {
		typ = s.X
	}
	if ix, ok := typ.(*ast.IndexExpr); ok {
		typ = ix.X
	}
	if id, ok := typ.(*ast.Ident); ok {
		return pkg + "." + id.Name + "." + fd.Name.Name
	}
	return pkg + "." + fd.Name.Name
}

// complexity is gocyclo's cyclomatic complexity of fd.
func complexity(fd *ast.FuncDecl) int {
	n := 1
	ast.Inspect(fd, func(node ast.Node) bool {
		switch x := node.(type) {
		case *ast.IfStmt, *ast.ForStmt, *ast.RangeStmt:
			n++
		case *ast.CaseClause:
			if x.List != nil {
				n++
			}
		case *ast.CommClause:
			if x.Comm != nil {
				n++
			}
		case *ast.BinaryExpr:
			if x.Op == token.LAND || x.Op == token.LOR {
				n++
			}
		}
		return true
	})
	return n
}
