package passes

import (
	"fmt"
	"go/ast"
	"go/token"
	"slices"
	"strings"
	"testing"

	"github.com/optc-dev/optc/graph"
)

// TestPassDependencies checks the table order the declarations of
// Pass.Shapes rely on: the shape provider runs after every rewrite in a
// round, in every level that runs a pass reading declared types. That
// the declarations are true is the driver's to check: it hands an
// analysis only to a pass that declares it (TestUndeclaredAnalysis,
// TestDeclaredTypesUndeclared), no code reads types around it
// (TestTypesThroughTheDriver), and every declared analysis is asked for
// (TestMain).
func TestPassDependencies(t *testing.T) {
	providerAt, lastRewrite := -1, -1
	for i, p := range All() {
		if p.ProvidesShapes {
			providerAt = i
			continue
		}
		if p.Level != OnRequest {
			lastRewrite = i
		}
	}
	if providerAt < 0 || providerAt < lastRewrite {
		t.Fatalf("the shape provider (at %d) must come after every -O pass (last at %d)", providerAt, lastRewrite)
	}
	for level := 1; level <= 2; level++ {
		pipeline, err := Select(level, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		needs, provides := "", false
		for _, p := range pipeline {
			if p.Shapes&DeclaredShapes != 0 {
				needs = p.Name
			}
			provides = provides || p.ProvidesShapes
			if p.Level == OnRequest {
				t.Errorf("-O%d runs %s, which is on request only", level, p.Name)
			}
		}
		if needs != "" && !provides {
			t.Errorf("-O%d runs %s, which reads declared types, without a shape provider", level, needs)
		}
	}
	if p, err := Lookup("matmul-add-to-gemm"); err != nil || p.Shapes&DeclaredShapes == 0 {
		t.Errorf("matmul-add-to-gemm must declare that it needs shapes: %v", err)
	}
}

// TestContextShapesDropped: Context.Shapes keeps its inference until the
// driver says the model changed, then infers the changed model.
func TestContextShapesDropped(t *testing.T) {
	f := newFusionFixture(t, 17)
	x := f.input("x", 1, 4)
	f.output(f.node("Relu", []*graph.Value{x}).Output(0))
	c := &Context{Model: f.Model}
	if c.Shapes().ValueTable == nil {
		t.Fatal("no inference")
	}
	y := f.node("Sigmoid", []*graph.Value{x}).Output(0)
	f.output(y)
	if c.Shapes().Get(y) != nil {
		t.Fatal("Shapes inferred again without a change reported: it does not keep its inference")
	}
	c.shapesChanged()
	if c.Shapes().Get(y) == nil {
		t.Fatal("Shapes kept a stale inference after shapesChanged")
	}
}

// TestPassOrder: every ordering constraint of the table (Pass.After)
// names a pass, gives its reason, and holds in the table and in every
// pipeline that runs both.
func TestPassOrder(t *testing.T) {
	pipelines := map[string][]*Pass{"table": All()}
	for level := 1; level <= 2; level++ {
		p, err := Select(level, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		pipelines[fmt.Sprintf("-O%d", level)] = p
	}
	for n := Cleanups; n <= ORTInt8Layout; n++ {
		pipelines[fmt.Sprintf("named %d", n)] = Pipeline(n)
	}
	constraints := 0
	for _, p := range All() {
		for _, f := range p.After {
			constraints++
			if _, err := Lookup(f.Pass); err != nil || f.Why == "" {
				t.Errorf("%s follows %q (%q): %v", p.Name, f.Pass, f.Why, err)
			}
			for name, pipeline := range pipelines {
				at := slices.IndexFunc(pipeline, func(q *Pass) bool { return q.Name == p.Name })
				before := slices.IndexFunc(pipeline, func(q *Pass) bool { return q.Name == f.Pass })
				if at >= 0 && before >= 0 && before > at {
					t.Errorf("%s: %s runs before %s, which it must follow (%s)", name, p.Name, f.Pass, f.Why)
				}
			}
		}
	}
	if constraints == 0 {
		t.Error("the table holds no ordering constraint")
	}
}

// TestUndeclaredAnalysis: the driver hands inferred shapes only to a pass
// that declares them; another's asking fails its run, naming it.
func TestUndeclaredAnalysis(t *testing.T) {
	checkAnalysisDeclared(t, func(c *Context) { c.Shapes() }, NoShapes, InferredShapes, "pass sneaky asked the driver for inferred shapes")
}

// TestPassForms: every table entry says how it is written, and says it
// truly: a LocalRule pass's Run builds a Rule, a GraphWide pass's does
// not (read from the source of the file declaring it).
func TestPassForms(t *testing.T) {
	runOf := map[string]string{}        // pass name -> its Run function's name
	funcs := map[string]*ast.FuncDecl{} // function name -> declaration
	for _, f := range packageSources(t, token.NewFileSet()) {
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.FuncDecl:
				if n.Recv == nil {
					funcs[n.Name.Name] = n
				}
			case *ast.CompositeLit:
				if id, ok := n.Type.(*ast.Ident); ok && id.Name == "Pass" {
					var passName, run string
					for _, e := range n.Elts {
						kv, ok := e.(*ast.KeyValueExpr)
						if !ok {
							continue
						}
						switch key := kv.Key.(*ast.Ident).Name; {
						case key == "Name":
							if lit, ok := kv.Value.(*ast.BasicLit); ok {
								passName = strings.Trim(lit.Value, `"`)
							}
						case key == "Run":
							if id, ok := kv.Value.(*ast.Ident); ok {
								run = id.Name
							}
						}
					}
					runOf[passName] = run
				}
			}
			return true
		})
	}
	for _, p := range All() {
		fd := funcs[runOf[p.Name]]
		if fd == nil {
			t.Errorf("%s: no Run function found in the package's source", p.Name)
			continue
		}
		buildsRule := false
		ast.Inspect(fd.Body, func(n ast.Node) bool {
			if cl, ok := n.(*ast.CompositeLit); ok {
				if ix, ok := cl.Type.(*ast.IndexExpr); ok {
					if id, ok := ix.X.(*ast.Ident); ok && id.Name == "Rule" {
						buildsRule = true
					}
				}
			}
			return true
		})
		switch {
		case p.Form == formUnset:
			t.Errorf("%s: its table entry has no Form (LocalRule or GraphWide)", p.Name)
		case p.Form == LocalRule && !buildsRule:
			t.Errorf("%s says LocalRule but %s builds no Rule", p.Name, fd.Name.Name)
		case p.Form == GraphWide && buildsRule:
			t.Errorf("%s says GraphWide but %s builds a Rule", p.Name, fd.Name.Name)
		}
	}
}
