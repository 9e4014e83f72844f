package doccheck

import (
	"go/build"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/optc-dev/optc/tools/testenv"
)

const module = "github.com/optc-dev/optc/"

// layers is docs/DESIGN.md's drawing of the packages as data: a package
// imports (outside its tests) only packages of a lower layer. A new
// package needs a row here and a place in DESIGN.md.
var layers = map[string]int{
	// leaves: no optc imports (lint: the Finding every target's checks report)
	"onnxpb": 0, "internal/atomicfile": 0, "internal/choice": 0, "internal/jsonfloat": 0, "internal/parallel": 0, "internal/procmem": 0, "lint": 0,
	"tools/mnist": 0, "tools/textlines": 0, "tools/zoo": 0, "tools/release": 0,
	"tools/cirecipe": 0, "tools/doccheck": 0, "tools/samestrings": 0,
	// latency: the one latency record and its statistics
	"latency": 0,
	// task: what a task metric plug-in implements
	"task": 0,
	// the IR, the runtime's installer (no cgo), and the build config: its
	// sections, whose owners (stages, targets) register their defaults and
	// rules into it (config.Register)
	"graph": 1, "ort/install": 1, "config": 1,
	// report/schema: the report.json sections the stages fill
	"report/schema": 1,
	// over the IR: analyses, kernels, Q/DQ insertion, the ORT binding, data
	"kernels": 2, "shapes": 2, "task/detect": 2, "quantize": 2, "ort": 2, "data": 2,
	// report.json, its renderings and optc diff, filled by the stages
	"report":          2,
	"tools/testgraph": 2, "tools/synth": 2, "tools/convstack": 2, "tools/testenv": 2,
	// rewrites and measurements
	"passes": 3, "export/tensorrt/trtlint": 3, "bench": 3, "calibrate": 3, "compare": 3, "infer": 3,
	"prune": 3, "tools/ortenv": 3, "tools/mnist/tonpy": 3, "tools/textlines/tonpy": 3,
	"task/ctc": 3, "task/textdet": 3, "task/segment": 3,
	// stages
	"export": 4, "placement": 4, "optimize": 4, "weightonly": 4, "tools/difftest": 4, "tools/conformance": 4,
	"task/tasks": 4,
	"ptq":        5,
	// deployment targets: the registry, the plug-ins, the list of them
	"export/target": 6,
	// (layer 7, targetLayer: every package export/targets imports, the
	// targets themselves, so that a new target is its package and one
	// line in export/targets)
	"export/targets": 8,
	// drivers
	"build": 9, "remeasure": 10, "tools/targettest": 10, "cmd": 11, "tools/benchsuite": 11,
	"cmd/optc": 12, "tools/benchsuite/run": 12,
}

// targetLayer is the layer of the target plug-ins: the packages
// export/targets registers.
const targetLayer = 7

// only are packages whose optc imports are limited further than their
// layer says.
var only = map[string][]string{
	// The IR knows nothing of optc but its own protobuf types.
	"graph": {"onnxpb", "internal/atomicfile"},
	// Passes never run ORT (an Evaluator is handed to them); quantize
	// inserts Q/DQ from ranges alone.
	"passes":   {"graph", "kernels", "shapes"},
	"quantize": {"graph", "internal/choice", "report/schema"},
	// config declares and decodes the sections; their names and rules
	// are their owners' (config.Register).
	"config": {"internal/choice"},
	// report renders and diffs report.json and imports no stage: the
	// stages fill it (build.Result.Report, ptq.Result.Report,
	// bench.Result.Report) with the sections they own in report/schema,
	// and optc diff --remeasure is package remeasure.
	"report":        {"config", "graph", "internal/atomicfile", "internal/choice", "internal/jsonfloat", "latency", "report/schema", "task"},
	"report/schema": {"internal/jsonfloat"},
	// Targets reach the build only through export/target.Host.
	"export/target": {"config", "data", "graph", "internal/atomicfile", "lint", "ort", "quantize"},
}

// The tree says what a package is for: internal/ holds the production
// leaves the optc binary is made of, tools/ the test and tool harnesses
// (test helpers, the zoo and bench suites, the release and CI recipes,
// the data generators). No production package imports a tools/ package,
// and every internal/ package is in the optc binary.
const harnesses, productionLeaves = "tools/", "internal/"

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
	layerOf := func(pkg string) (int, bool) {
		if l, ok := layers[pkg]; ok {
			return l, true
		}
		if strings.HasPrefix(pkg, "export/") && slices.Contains(imports["export/targets"], pkg) {
			return targetLayer, true
		}
		return 0, false
	}
	for pkg, imps := range imports {
		layer, ok := layerOf(pkg)
		if !ok {
			t.Errorf("package %s is not in the layer table (tools/doccheck/imports_test.go, docs/DESIGN.md): where does it belong?", pkg)
			continue
		}
		for _, imp := range imps {
			if l, ok := layerOf(imp); ok && l >= layer {
				t.Errorf("%s (layer %d) imports %s (layer %d): imports point down only", pkg, layer, imp, l)
			}
			if l, _ := layerOf(imp); l == targetLayer && pkg != "export/targets" {
				// The build reaches a target only through the registry.
				t.Errorf("%s imports the target %s: only export/targets does (the rest reach a target through export/target)", pkg, imp)
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
	for pkg, imps := range imports {
		for _, imp := range imps {
			if strings.HasPrefix(imp, harnesses) && !strings.HasPrefix(pkg, harnesses) {
				t.Errorf("%s imports the harness %s: production code never imports tools/ (only tests do)", pkg, imp)
			}
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
		if strings.HasPrefix(p, harnesses) {
			t.Errorf("the optc binary contains the harness %s", p)
		}
		for _, imp := range imports[p] {
			visit(imp)
		}
	}
	visit("cmd/optc")
	if !seen["export/targets"] || !seen["graph"] {
		t.Errorf("cmd/optc's closure misses packages: %v", seen)
	}
	for pkg := range imports {
		if strings.HasPrefix(pkg, productionLeaves) && !seen[pkg] {
			t.Errorf("%s is not in the optc binary: a harness belongs under tools/, internal/ is for the binary's own leaves", pkg)
		}
	}
}
