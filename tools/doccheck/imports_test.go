package doccheck

import (
	"go/build"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/optc-dev/optc/internal/testenv"
)

const module = "github.com/optc-dev/optc/"

// layers is docs/DESIGN.md's drawing of the packages as data: a package
// imports (outside its tests) only packages of a lower layer. A new
// package needs a row here and a place in DESIGN.md.
var layers = map[string]int{
	// leaves: no optc imports (lint: the Finding every target's checks report)
	"onnxpb": 0, "internal/atomicfile": 0, "internal/choice": 0, "internal/jsonfloat": 0, "internal/parallel": 0, "internal/procmem": 0, "lint": 0,
	"internal/mnist": 0, "internal/textlines": 0, "internal/zoo": 0, "internal/release": 0,
	"internal/cirecipe": 0, "internal/doccheck": 0,
	// task: what a task metric plug-in implements
	"task": 0,
	// the IR, and the runtime's installer (no cgo)
	"graph": 1, "ort/install": 1,
	// over the IR: analyses, kernels, Q/DQ insertion, the ORT binding, data
	"kernels": 2, "shapes": 2, "task/detect": 2, "quantize": 2, "ort": 2, "data": 2,
	"internal/testgraph": 2, "internal/synth": 2, "internal/convstack": 2, "internal/testenv": 2,
	// rewrites and measurements
	"passes": 3, "export/tensorrt/trtlint": 3, "bench": 3, "calibrate": 3, "compare": 3, "infer": 3,
	"prune": 3, "internal/ortenv": 3, "internal/mnist/tonpy": 3, "internal/textlines/tonpy": 3,
	"task/ctc": 3, "task/textdet": 3, "task/segment": 3,
	// stages
	"export": 4, "placement": 4, "optimize": 4, "weightonly": 4, "internal/difftest": 4, "internal/conformance": 4,
	"task/tasks": 4,
	"ptq":        5, "config": 5,
	// deployment targets: the registry, the plug-ins, the list of them
	"export/target": 6,
	"export/ort":    7, "export/tensorrt": 7, "export/triton": 7, "export/openvino": 7,
	"export/targets": 8,
	// drivers
	"build": 9, "report": 10, "cmd": 11, "internal/benchsuite": 11,
	"cmd/optc": 12, "internal/benchsuite/run": 12,
}

// only are packages whose optc imports are limited further than their
// layer says.
var only = map[string][]string{
	// The IR knows nothing of optc but its own protobuf types.
	"graph": {"onnxpb", "internal/atomicfile"},
	// Passes never run ORT (an Evaluator is handed to them); quantize
	// inserts Q/DQ from ranges alone.
	"passes":   {"graph", "kernels", "shapes"},
	"quantize": {"graph", "internal/choice"},
	// Targets reach the build only through export/target.Host.
	"export/target": {"config", "data", "graph", "internal/atomicfile", "lint", "ort", "quantize"},
}

// testOnly are internal packages for tests and tools; the optc binary
// must not contain them.
var testOnly = []string{"internal/testenv", "internal/testgraph", "internal/difftest", "internal/ortenv",
	"internal/conformance", "internal/convstack", "internal/synth", "internal/zoo", "internal/cirecipe",
	"internal/doccheck", "internal/release", "internal/benchsuite", "internal/benchsuite/run",
	"internal/mnist", "internal/mnist/tonpy", "internal/textlines", "internal/textlines/tonpy"}

// TestImportDirection fails when an import arrow points the wrong way:
// up or across the layers of DESIGN.md, past a package's own limit, or
// from the optc binary into a test-only package.
func TestImportDirection(t *testing.T) {
	root := testenv.RepoRoot()
	imports := map[string][]string{} // package -> optc packages it imports (not in tests)
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if p != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		pkg, err := build.ImportDir(p, 0)
		if err != nil {
			return nil // no Go files here (or only tests)
		}
		rel, _ := filepath.Rel(root, p)
		name := filepath.ToSlash(rel)
		var own []string
		for _, imp := range pkg.Imports {
			if strings.HasPrefix(imp, module) {
				own = append(own, strings.TrimPrefix(imp, module))
			}
		}
		imports[name] = own
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(imports) < 40 {
		t.Fatalf("found only %d packages under %s", len(imports), root)
	}
	for pkg, imps := range imports {
		layer, ok := layers[pkg]
		if !ok {
			t.Errorf("package %s is not in the layer table (internal/doccheck/imports_test.go, docs/DESIGN.md): where does it belong?", pkg)
			continue
		}
		for _, imp := range imps {
			if l, ok := layers[imp]; ok && l >= layer {
				t.Errorf("%s (layer %d) imports %s (layer %d): imports point down only", pkg, layer, imp, l)
			}
			if allowed, ok := only[pkg]; ok && !slices.Contains(allowed, imp) {
				t.Errorf("%s imports %s; it may import only %s", pkg, imp, strings.Join(allowed, ", "))
			}
		}
	}
	for pkg := range layers {
		if _, ok := imports[pkg]; !ok {
			t.Errorf("the layer table lists %s, which does not exist", pkg)
		}
	}
	// What the optc binary is made of.
	seen := map[string]bool{}
	var visit func(p string)
	visit = func(p string) {
		if seen[p] {
			return
		}
		seen[p] = true
		if slices.Contains(testOnly, p) {
			t.Errorf("the optc binary contains the test-only package %s", p)
		}
		for _, imp := range imports[p] {
			visit(imp)
		}
	}
	visit("cmd/optc")
	if !seen["export/targets"] || !seen["graph"] {
		t.Errorf("cmd/optc's closure misses packages: %v", seen)
	}
}
