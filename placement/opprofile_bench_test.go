package placement_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/optc-dev/optc/calibrate"
	"github.com/optc-dev/optc/data"
	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/ort"
	"github.com/optc-dev/optc/placement"
	"github.com/optc-dev/optc/ptq"
	"github.com/optc-dev/optc/quantize"
	"github.com/optc-dev/optc/tools/ortenv"
	"github.com/optc-dev/optc/tools/testenv"
)

// BenchmarkOpProfile prints the tables of docs/int8-cpu.md: for
// mobilenet_v3_large and shufflenet_v2_x1_0 (zoo, random weights) and the
// PaddleOCR cls model,
// the FP32 input and its all-INT8 model (`optc quantize` defaults,
// ort) profiled in ORT at level all, 1 thread, batch 1 and 8: time
// per kernel as ORT ran it, and the Q/DQ conversions ORT left running,
// by the float op on their other side.
//
//	go test -run='^$' -bench=OpProfile -benchtime=1x -timeout=30m ./placement
//
// OPPROFILE_MODELS=cls limits the models.
func BenchmarkOpProfile(b *testing.B) {
	ortenv.Require(b)
	dir := b.TempDir()
	zoo := func(f string) string { return testenv.Data(b, "zoo/"+f) }
	tl := func(f string) string { return testenv.Data(b, "textlines/"+f) }
	cases := []placementCase{
		{"mobilenet_v3_large", zoo("mobilenet_v3_large/dynbatch.onnx"), zoo("mobilenet_v3_large/calib.npy"), "", "", 0, []int64{1, 3, 64, 64}},
		{"cls", testenv.Data(b, "ocr-models/ch_ppocr_mobile_v2.0_cls_infer.onnx"), tl("cls_calib.npy"), tl("cls_images.npy"), tl("cls_labels.npy"), 0, []int64{1, 3, 48, 192}},
		{"shufflenet_v2_x1_0", zoo("shufflenet_v2_x1_0/dynbatch.onnx"), zoo("shufflenet_v2_x1_0/calib.npy"), "", "", 0, []int64{1, 3, 64, 64}},
	}
	if only := os.Getenv("OPPROFILE_MODELS"); only != "" {
		cases = slices.DeleteFunc(cases, func(c placementCase) bool { return !slices.Contains(strings.Split(only, ","), c.name) })
	}
	for range b.N {
		for _, c := range cases {
			opProfile(b, dir, c)
		}
	}
}

func opProfile(b *testing.B, dir string, c placementCase) {
	m, err := graph.LoadFile(c.model)
	if err != nil {
		b.Fatal(err)
	}
	spec := data.Spec{Shapes: map[string][]int64{data.GraphInputs(m.Graph)[0].Name: c.shape}}
	sess := ort.DefaultOptions()
	sess.IntraOpThreads = 1
	out := filepath.Join(dir, c.name+".int8.onnx")
	res, err := ptq.Run(ptq.Options{Input: c.model, Output: out, CalibData: c.calib,
		CalibOpts: data.Options{Batch: 8}, Method: calibrate.Percentile, Quant: quantize.Options{Target: quantize.TargetORT},
		EvalData: c.eval, EvalOpts: data.Options{Batch: 8, Samples: 300}, EvalLabels: c.label,
		Session: sess, Inputs: spec, NoLatency: true, AllowAccuracyLoss: true})
	if err != nil {
		b.Fatalf("%s: %v", c.name, err)
	}
	int8Model, err := graph.LoadFile(out)
	if err != nil {
		b.Fatal(err)
	}
	var models []graph.Serialized
	for _, p := range []string{c.model, out} {
		bs, err := os.ReadFile(p)
		if err != nil {
			b.Fatal(err)
		}
		models = append(models, graph.Serialized{Bytes: bs})
	}
	fmt.Printf("\n### %s (%d quantized, %d skipped, %d activation Q/DQ pairs; guard: %s)\n",
		c.name, len(res.Quantize.Quantized), len(res.Quantize.Skipped), res.Quantize.QDQPairs, guardWords(res))
	for _, batch := range []int{1, 8} {
		var ops [2][]placement.OpTime
		var int8Nodes []placement.NodeTime
		for i, mod := range models {
			o, nodes, err := placement.ProfileOps(mod, sess, spec, batch)
			if err != nil {
				b.Fatalf("%s: %v", c.name, err)
			}
			ops[i] = o
			if i == 1 {
				int8Nodes = nodes
			}
		}
		fmt.Printf("\nbatch %d, 1 thread, level all: FP32 %.3f ms, INT8 %.3f ms (sums of kernel medians)\n\n", batch, total(ops[0]), total(ops[1]))
		fmt.Println("| kernel | FP32 nodes | FP32 ms | INT8 nodes | INT8 ms |")
		fmt.Println("|---|---|---|---|---|")
		for _, k := range kernelOrder(ops) {
			fmt.Printf("| %s | %s | %s |\n", k, cell(ops[0], k), cell(ops[1], k))
		}
		fmt.Printf("\nQ/DQ left running in the INT8 model at batch %d, by the float op on their other side:\n\n", batch)
		fmt.Println("| conversion | next to | nodes | ms |")
		fmt.Println("|---|---|---|---|")
		for _, r := range conversions(int8Model, int8Nodes) {
			fmt.Printf("| %s | %s | %d | %.3f |\n", r.Op, r.next, r.Nodes, r.Ms)
		}
	}
}

func guardWords(r *ptq.Result) string {
	if r.Accuracy != nil && r.Accuracy.Accuracy != nil {
		return fmt.Sprintf("accuracy FP32 %.2f%%, INT8 %.2f%%", r.Accuracy.Accuracy.A, r.Accuracy.Accuracy.B)
	}
	if r.Accuracy != nil && len(r.Accuracy.Outputs) > 0 {
		return fmt.Sprintf("cosine %.4f", r.Accuracy.Outputs[0].Cosine)
	}
	return "-"
}

func total(ops []placement.OpTime) float64 {
	var t float64
	for _, o := range ops {
		t += o.Ms
	}
	return t
}

// kernelOrder lists the kernels of both profiles, slowest INT8 first.
func kernelOrder(ops [2][]placement.OpTime) []string {
	var ks []string
	for _, o := range ops[1] {
		ks = append(ks, o.Op)
	}
	for _, o := range ops[0] {
		if !slices.Contains(ks, o.Op) {
			ks = append(ks, o.Op)
		}
	}
	return ks
}

func cell(ops []placement.OpTime, k string) string {
	for _, o := range ops {
		if o.Op == k {
			return fmt.Sprintf("%d | %.3f", o.Nodes, o.Ms)
		}
	}
	return "- | -"
}

type convRow struct {
	placement.OpTime
	next string
}

// conversions groups the QuantizeLinear/DequantizeLinear nodes ORT ran by
// the float op they convert for: a QuantizeLinear by the producer of its
// input, a DequantizeLinear by its readers. ORT keeps the names of the
// Q/DQ nodes it does not fuse, so they map back to m's nodes.
func conversions(m *graph.Model, nodes []placement.NodeTime) []convRow {
	byName := map[string]*graph.Node{}
	for _, n := range m.Graph.Nodes {
		byName[n.Name] = n
	}
	var rows []convRow
	add := func(op, next string, ms float64) {
		for i := range rows {
			if rows[i].Op == op && rows[i].next == next {
				rows[i].Nodes++
				rows[i].Ms += ms
				return
			}
		}
		rows = append(rows, convRow{placement.OpTime{Op: op, Nodes: 1, Ms: ms}, next})
	}
	for _, nt := range nodes {
		if nt.Op != "QuantizeLinear" && nt.Op != "DequantizeLinear" {
			continue
		}
		n := byName[nt.Name]
		next := "(node ORT made)"
		switch {
		case n == nil:
		case nt.Op == "QuantizeLinear":
			next = "input"
			if p := n.Input(0).Producer(); p != nil {
				next = p.OpType
			}
		default:
			var readers []string
			for _, u := range n.Output(0).Uses() {
				if !slices.Contains(readers, u.Node.OpType) {
					readers = append(readers, u.Node.OpType)
				}
			}
			slices.Sort(readers)
			next = strings.Join(readers, "+")
			if n.Output(0).IsReturned() {
				next += " (output)"
			}
		}
		add(nt.Op, next, nt.Ms)
	}
	slices.SortFunc(rows, func(a, b convRow) int {
		if a.Ms != b.Ms {
			if a.Ms > b.Ms {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Op+a.next, b.Op+b.next)
	})
	return rows
}
