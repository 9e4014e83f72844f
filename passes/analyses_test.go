package passes

import (
	"flag"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/optc-dev/optc/graph"
)

// asked is every analysis each pass asked the driver for during the
// package's tests.
var asked struct {
	sync.Mutex
	by map[string]ShapeUse
}

// TestMain runs the package's tests hearing what each pass asks the
// driver for, and then, when the whole suite ran, checks that every pass
// asked at least once for each analysis its table entry declares: a
// declaration nothing uses is as wrong as a use nothing declares (the
// driver fails that one during the run).
func TestMain(m *testing.M) {
	asked.by = map[string]ShapeUse{}
	analysisAsked = func(p *Pass, a ShapeUse) {
		asked.Lock()
		asked.by[p.Name] |= a
		asked.Unlock()
	}
	code := m.Run()
	if code == 0 && wholeSuite() {
		for _, p := range append(All(), upgradeOpset) {
			for _, a := range []ShapeUse{DeclaredShapes, InferredShapes} {
				if p.Shapes&a != 0 && asked.by[p.Name]&a == 0 {
					fmt.Fprintf(os.Stderr, "FAIL: pass %s declares %s in its table entry but never asked the driver for it in this package's tests\n", p.Name, analysisName(a))
					code = 1
				}
			}
		}
	}
	os.Exit(code)
}

// wholeSuite reports whether every test of the package ran (no -run,
// -skip or -short subset).
func wholeSuite() bool {
	for _, name := range []string{"test.run", "test.skip"} {
		if f := flag.Lookup(name); f != nil && f.Value.String() != "" {
			return false
		}
	}
	return !testing.Short()
}

func analysisName(a ShapeUse) string {
	if a == DeclaredShapes {
		return "DeclaredShapes (Context.Declared)"
	}
	return "InferredShapes (Context.Shapes)"
}

// packageSources parses the package's own Go files (not its tests) in
// name order: what the checks of its source read.
func packageSources(t *testing.T, fset *token.FileSet) []*ast.File {
	t.Helper()
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	return files
}

// TestTypesThroughTheDriver: outside the analyses (analyses.go), the
// shape provider (infer_shapes.go) and the edit's carrying of a graph
// output's declaration to its replacement (edit.go), no code of the
// package reads a value's declared type or runs shape inference itself:
// a pass reads them only through what the driver hands it, so the
// driver's check of its declaration sees every read. A write (a rewrite
// declaring the type of a value it made or changed) is not a read.
// Checked on the type-checked source, so a helper cannot hide a read.
func TestTypesThroughTheDriver(t *testing.T) {
	out, err := exec.Command("go", "list", "-export", "-deps", "-f", "{{.ImportPath}}\t{{.Export}}", ".").Output()
	if err != nil {
		t.Fatalf("go list -export: %v", err)
	}
	exports := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if path, file, ok := strings.Cut(line, "\t"); ok && file != "" {
			exports[path] = file
		}
	}
	fset := token.NewFileSet()
	files := packageSources(t, fset)
	conf := types.Config{Importer: importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		file, ok := exports[path]
		if !ok {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(file)
	})}
	info := &types.Info{Selections: map[*ast.SelectorExpr]*types.Selection{}, Uses: map[*ast.Ident]types.Object{}}
	if _, err := conf.Check("github.com/optc-dev/optc/passes", fset, files, info); err != nil {
		t.Fatal(err)
	}
	writes := map[*ast.SelectorExpr]bool{}
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			if as, ok := n.(*ast.AssignStmt); ok {
				for _, lhs := range as.Lhs {
					if sel, ok := lhs.(*ast.SelectorExpr); ok {
						writes[sel] = true
					}
				}
			}
			return true
		})
	}
	allowed := map[string]bool{"analyses.go": true, "infer_shapes.go": true, "edit.go": true}
	reads, infers := 0, 0
	for sel, s := range info.Selections {
		if s.Kind() != types.FieldVal || s.Obj().Name() != "Type" || !isGraphValue(s.Recv()) || writes[sel] {
			continue
		}
		reads++
		if pos := fset.Position(sel.Pos()); !allowed[pos.Filename] {
			t.Errorf("%s:%d reads a value's declared type directly: ask the driver (c.Declared()) and declare DeclaredShapes", pos.Filename, pos.Line)
		}
	}
	for id, obj := range info.Uses {
		if fn, ok := obj.(*types.Func); ok && fn.Name() == "Infer" && fn.Pkg() != nil && fn.Pkg().Path() == "github.com/optc-dev/optc/shapes" {
			infers++
			if pos := fset.Position(id.Pos()); !allowed[pos.Filename] || pos.Filename == "edit.go" {
				t.Errorf("%s:%d runs shape inference itself: ask the driver (c.Shapes()) and declare InferredShapes", pos.Filename, pos.Line)
			}
		}
	}
	if reads == 0 || infers == 0 {
		t.Fatalf("found %d reads of Value.Type and %d calls of shapes.Infer: the check sees nothing", reads, infers)
	}
}

// isGraphValue reports whether t is graph.Value or a pointer to it.
func isGraphValue(t types.Type) bool {
	if p, ok := t.(*types.Pointer); ok {
		t = p.Elem()
	}
	n, ok := t.(*types.Named)
	return ok && n.Obj().Name() == "Value" && n.Obj().Pkg() != nil && n.Obj().Pkg().Path() == "github.com/optc-dev/optc/graph"
}

// TestDeclaredTypesUndeclared: the driver hands declared types only to a
// pass that declares them; another's asking fails its run, naming it.
func TestDeclaredTypesUndeclared(t *testing.T) {
	checkAnalysisDeclared(t, func(c *Context) { c.Declared() }, InferredShapes, DeclaredShapes, "pass sneaky asked the driver for declared types")
}

// checkAnalysisDeclared runs a pass that asks the driver for an analysis
// (ask) on a one-Relu model: declaring only undeclared, its run must fail
// with an error containing refusal; declaring declared, it must run.
func checkAnalysisDeclared(t *testing.T, ask func(*Context), undeclared, declared ShapeUse, refusal string) {
	t.Helper()
	f := newFusionFixture(t, 17)
	x := f.input("x", 1, 4)
	f.output(f.node("Relu", []*graph.Value{x}).Output(0))
	sneaky := &Pass{Name: "sneaky", Level: 2, Shapes: undeclared, Run: func(c *Context) (Stats, error) {
		ask(c)
		return Stats{}, nil
	}}
	_, err := Run(f.Model, []*Pass{sneaky}, Options{})
	if err == nil || !strings.Contains(err.Error(), refusal) {
		t.Fatalf("an undeclared analysis: %v", err)
	}
	honest := *sneaky
	honest.Shapes = declared
	if _, err := Run(f.Model, []*Pass{&honest}, Options{}); err != nil {
		t.Fatalf("a declared analysis: %v", err)
	}
}
