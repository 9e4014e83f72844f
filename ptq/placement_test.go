package ptq_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/optc-dev/optc/calibrate"
	"github.com/optc-dev/optc/data"
	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/ort"
	"github.com/optc-dev/optc/passes"
	"github.com/optc-dev/optc/placement"
	"github.com/optc-dev/optc/ptq"
	"github.com/optc-dev/optc/quantize"
	"github.com/optc-dev/optc/report/schema"
	"github.com/optc-dev/optc/tools/ortenv"
	"github.com/optc-dev/optc/tools/testenv"
)

// --placement all-int8 writes byte for byte what optc quantize wrote
// before placement existed, and says so in its placement record.
func TestPlacementAllINT8IsToday(t *testing.T) {
	ortenv.Require(t)
	dir := t.TempDir()
	run := func(mode, out string) *ptq.Result {
		res, err := ptq.Run(ptq.Options{Input: testenv.Model("mnist_cnn.onnx"), Output: filepath.Join(dir, out),
			CalibData: testenv.Data(t, "mnist/train_images.npy"), CalibOpts: data.Options{Samples: 64, Batch: 16},
			CalibCache: filepath.Join(dir, "calib.json"), Method: calibrate.Percentile,
			Quant: quantize.Options{Target: quantize.TargetORT}, Session: ort.DefaultOptions(), NoLatency: true, Placement: mode})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	today, all := run("", "today.onnx"), run(schema.ModeAllINT8, "all.onnx")
	if !testenv.SameFile(t, filepath.Join(dir, "today.onnx"), filepath.Join(dir, "all.onnx")) {
		t.Error("--placement all-int8 wrote another model than optc quantize without placement")
	}
	p := all.Placement
	if today.Placement != nil || p == nil || p.Mode != schema.ModeAllINT8 || p.Recommended != schema.RecommendINT8 ||
		len(p.Regions) != len(all.Quantize.Quantized) || len(p.KeepFloat()) != 0 {
		t.Errorf("placement records: without %+v, all-int8 %+v", today.Placement, p)
	}
}

// A placement file that chose the padded float model (conv channels
// aligned for ORT's symmetric INT8 kernels) replays to a model quantized
// from it, in QDQ and in QOperator form, and the per-tensor SQNR pairs
// each INT8 tensor with a float tensor of its own shape (the padded
// model's where the written model is quantized from it).
func TestPlacementReplaysAlignedChannels(t *testing.T) {
	ortenv.Require(t)
	align := ort.Int8ChannelAlign()
	if align == 0 {
		t.Skip("no symmetric INT8 conv kernels on this CPU")
	}
	dir := t.TempDir()
	in := testenv.Data(t, "zoo/mobilenet_v3_small/dynbatch.onnx")
	run := func(mode, out string) *ptq.Result {
		res, err := ptq.Run(ptq.Options{Input: in, Output: filepath.Join(dir, out),
			CalibData: testenv.Data(t, "zoo/mobilenet_v3_small/calib.npy"), CalibOpts: data.Options{Batch: 8},
			CalibCache: filepath.Join(dir, "calib.json"), Method: calibrate.Percentile, AllowAccuracyLoss: true,
			Quant: quantize.Options{Target: quantize.TargetORT}, Session: ort.DefaultOptions(), NoLatency: true, Placement: mode})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	// How many convs the padding widens, as ptq's float model has them.
	m, err := graph.LoadFile(in)
	if err != nil {
		t.Fatal(err)
	}
	pipeline := passes.Pipeline(passes.Quantization)
	if _, err := passes.Run(m, pipeline, passes.Options{Eval: &ort.NodeEvaluator{}}); err != nil {
		t.Fatal(err)
	}
	rep, err := passes.Run(m, passes.Pipeline(passes.ORTInt8Layout), passes.Options{ChannelBlock: align})
	if err != nil {
		t.Fatal(err)
	}
	convs := rep.Passes[len(rep.Passes)-1].Stats.Rewritten
	if convs == 0 {
		t.Fatal("mobilenet_v3_small's 72-, 88- and 120-channel convs were not padded")
	}

	f := run(schema.ModeAllINT8, "all.onnx").Placement
	f.Aligned = &schema.Alignment{Channels: align, Convs: convs, Chosen: true}
	for _, chosen := range []string{schema.CandidateAllINT8, placement.CandidateQOperator} {
		f.Chosen = chosen
		js, err := f.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		file := filepath.Join(dir, chosen+".json")
		if err := os.WriteFile(file, js, 0o644); err != nil {
			t.Fatal(err)
		}
		res := run(file, chosen+".onnx")
		if len(res.TensorSQNR) == 0 {
			t.Errorf("%s: no per-tensor SQNR", chosen)
		}
		q, err := graph.LoadFile(filepath.Join(dir, chosen+".onnx"))
		if err != nil {
			t.Fatal(err)
		}
		depthwise := 0
		for _, n := range q.Graph.Nodes {
			g := n.AttrInt("group", 1)
			quantized := n.OpType == "QLinearConv" || n.OpType == "Conv" && n.Input(1).Producer() != nil && n.Input(1).Producer().OpType == "DequantizeLinear"
			if g == 1 || !quantized {
				continue
			}
			depthwise++
			if g%int64(align) != 0 {
				t.Errorf("%s: quantized depthwise conv %s has %d channels, not a multiple of %d", chosen, n.Name, g, align)
			}
		}
		if depthwise == 0 {
			t.Errorf("%s: no quantized depthwise conv", chosen)
		}
	}
}
