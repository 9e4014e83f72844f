package prune

import (
	"encoding/binary"
	"math"
	"math/rand"
	"path/filepath"
	"testing"

	"github.com/optc-dev/optc/compare"
	"github.com/optc-dev/optc/data"
	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/ort"
	"github.com/optc-dev/optc/report/schema"
	"github.com/optc-dev/optc/tools/ortenv"
	"github.com/optc-dev/optc/tools/testgraph"
)

// twinChannels builds x[N,4,6,6] -> Conv A (16 channels, 1x1) -> Relu ->
// Conv B (3x3, pad 1, 6 channels) -> y, where A's channels 8..15 are its
// channels 0..7 times 2: Relu(2z) = 2·Relu(z), so half of the channels
// are redundant and a least-squares refit of B can remove them exactly.
func twinChannels(t *testing.T, rng *rand.Rand) []byte {
	wa := make([]float32, 16*4)
	for i := range 8 * 4 {
		wa[i] = float32(rng.NormFloat64())
		wa[i+8*4] = 2 * wa[i]
	}
	ba := make([]float32, 16)
	for i := range 8 {
		ba[i] = float32(rng.NormFloat64() * 0.1)
		ba[i+8] = 2 * ba[i]
	}
	wb := normals(rng, 6*16*9)
	return twoConvs(t, "twins", wa, ba, true, wb, make([]float32, 6))
}

// normals is n standard normal draws from rng.
func normals(rng *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(rng.NormFloat64())
	}
	return v
}

// twoConvs builds x[N,4,6,6] -> Conv A (1x1, weights wa, bias ba unless
// nil) -> Relu when relu -> Conv B (3x3, pad 1, weights wb, bias bb) -> y,
// the graph the data-driven pruning tests compensate in: A's channel
// count is len(wa)/4 and B's len(bb).
func twoConvs(t *testing.T, name string, wa, ba []float32, relu bool, wb, bb []float32) []byte {
	b := testgraph.New(t, name, 13)
	x := b.Input("x", -1, 4, 6, 6)
	x.Type = graph.TensorType(graph.Float, graph.Shape{graph.SymbolicDim("N"), graph.StaticDim(4), graph.StaticDim(6), graph.StaticDim(6)})
	mid, out := int64(len(wa)/4), int64(len(bb))
	aIns := []*graph.Value{x, b.Floats("wa", []int64{mid, 4, 1, 1}, wa...)}
	if ba != nil {
		aIns = append(aIns, b.Floats("ba", []int64{mid}, ba...))
	}
	a := b.Node("A", "Conv", aIns...).Output(0)
	if relu {
		a = b.Node("R", "Relu", a).Output(0)
	}
	c := b.NodeTo("B", "Conv", b.Value("y"), a, b.Floats("wb", []int64{out, mid, 3, 3}, wb...), b.Floats("bb", []int64{out}, bb...))
	c.SetAttr(&graph.Attr{Name: "pads", Type: graph.AttrInts, Ints: []int64{1, 1, 1, 1}})
	b.Output(c.Output(0), 1, out, 6, 6)
	c.Output(0).Type = graph.TensorType(graph.Float, graph.Shape{graph.SymbolicDim("N"), graph.StaticDim(out), graph.StaticDim(6), graph.StaticDim(6)})
	model, err := graph.Marshal(b.Model)
	if err != nil {
		t.Fatal(err)
	}
	return model
}

// randomNpy writes n samples of shape dims drawn from rng as a .npy.
func randomNpy(t *testing.T, rng *rand.Rand, n int, dims ...int64) string {
	size := int64(n)
	for _, d := range dims {
		size *= d
	}
	buf := make([]byte, 4*size)
	for i := range size {
		binary.LittleEndian.PutUint32(buf[4*i:], math.Float32bits(float32(rng.NormFloat64())))
	}
	tn, err := graph.NewTensor("x", graph.Float, append([]int64{int64(n)}, dims...), buf)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "x.npy")
	if err := data.WriteNpy(path, tn); err != nil {
		t.Fatal(err)
	}
	return path
}

// randomCalibration draws from rng 64 calibration samples and then 32
// held-out ones for twoConvs' input: d reads the calibration samples in
// batches of 16 with damping damp, held is the held-out .npy.
func randomCalibration(t *testing.T, rng *rand.Rand, damp float64) (d *Data, held string) {
	calib := randomNpy(t, rng, 64, 4, 6, 6)
	held = randomNpy(t, rng, 32, 4, 6, 6)
	return &Data{Spec: calib, Opts: data.Options{Batch: 16}, Session: ort.DefaultOptions(), Damp: damp}, held
}

func pruneBytesWith(t *testing.T, model []byte, meth Method, opts Options) (*schema.PruneReport, []byte) {
	t.Helper()
	m, err := graph.Parse(model, "")
	if err != nil {
		t.Fatal(err)
	}
	return verifiedPrune(t, m, func(m *graph.Model) (*schema.PruneReport, error) { return Apply(m, meth, opts) })
}

// outputError runs both models in ORT on the .npy at path and returns the
// relative max error of the pruned one's only output.
func outputError(t *testing.T, a, b []byte, path string) float64 {
	t.Helper()
	res, err := compare.Models(compare.Options{ModelA: "unpruned", ModelB: "pruned",
		AInMemory: graph.Serialized{Bytes: a}, BInMemory: graph.Serialized{Bytes: b},
		Data: path, DataOpts: data.Options{Batch: 16}, Atol: map[string]float64{"": 1e9}, Session: ort.DefaultOptions()})
	if err != nil {
		t.Fatal(err)
	}
	o := res.Outputs[0]
	return float64(o.MaxAbs) / float64(o.MaxRef)
}

// TestReconstructTwins: with calibration data, channels:0.5 removes one
// of each pair of twin channels and refits B so that the model computes
// what it did (checked in ORT on other data); L1 selection alone, which
// removes the smaller twins without a refit, does not.
func TestReconstructTwins(t *testing.T) {
	ortenv.Require(t)
	rng := rand.New(rand.NewSource(1))
	model := twinChannels(t, rng)
	d, held := randomCalibration(t, rng, 1e-7)
	meth := Method{Kind: "channels", Ratio: 0.5}
	rep, got := pruneBytesWith(t, model, meth, Options{Data: d})
	var a *schema.PruneLayer
	for i := range rep.Layers {
		if rep.Layers[i].Node == "A" {
			a = &rep.Layers[i]
		}
	}
	if a == nil || a.Removed != 8 || a.Refit != "least squares" {
		t.Fatalf("layer A: %+v, want 8 channels removed and refit by least squares", a)
	}
	if e := outputError(t, model, got, held); e > 1e-4 {
		t.Errorf("reconstructed: relative max error %.3g on held-out data, want <= 1e-4", e)
	}
	_, plain := pruneBytesWith(t, model, meth, Options{})
	if e := outputError(t, model, plain, held); e < 0.05 {
		t.Errorf("L1 without refit: relative max error %.3g, want a visible change (the test would not tell)", e)
	}
	// Same inputs and options, same bytes.
	if _, again := pruneBytesWith(t, model, meth, Options{Data: d}); string(again) != string(got) {
		t.Errorf("two reconstructions of the same model differ")
	}
}
