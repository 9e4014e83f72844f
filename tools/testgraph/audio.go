package testgraph

import (
	"math/rand/v2"
	"testing"

	"github.com/optc-dev/optc/graph"
)

// AudioSamples is the length of Audio's input; with a kernel of 64 and a
// stride of 16 it makes AudioFrames frames of 16 bins.
const (
	AudioSamples = 4096
	AudioFrames  = (AudioSamples-64)/16 + 1
)

// Audio is an audio front-end (issue 17): an STFT-like Conv ("stft": 16
// seeded random filters of 64 taps, stride 16, each with an expected sum
// of squared taps of 1), its power ("power": Pow 2), a floor ("floor":
// Add 1e-6), the energy per frame ("energy": ReduceSum over the bins),
// its magnitude ("magnitude": Sqrt) and a log ("log"):
// "audio" float32[1,1,4096] -> "log_out" float32[1,1,253]. On audio in
// ±3000 the Conv stays within about ±8000 and its square does not fit
// float16; at ±32767 the Conv itself passes float16's 65504.
func Audio(t testing.TB) *Builder {
	t.Helper()
	b := New(t, "audio", 17)
	x := b.Input("audio", 1, 1, AudioSamples)
	const filters, taps = 16, 64
	r := rand.New(rand.NewPCG(7, 7))
	w := make([]float32, filters*taps)
	for i := range w {
		w[i] = float32(r.NormFloat64() / 8)
	}
	conv := b.Node("stft", "Conv", x, b.Floats("stft_w", []int64{filters, 1, taps}, w...))
	conv.SetAttr(&graph.Attr{Name: "strides", Type: graph.AttrInts, Ints: []int64{16}})
	pow := b.Node("power", "Pow", conv.Output(0), b.Floats("two", nil, 2))
	add := b.Node("floor", "Add", pow.Output(0), b.Floats("eps", nil, 1e-6))
	sum := b.Node("energy", "ReduceSum", add.Output(0), b.Int64s("bins", []int64{1}, 1))
	sqrt := b.Node("magnitude", "Sqrt", sum.Output(0))
	lg := b.Node("log", "Log", sqrt.Output(0))
	b.Output(lg.Output(0), 1, 1, AudioFrames)
	if err := b.Model.Verify(); err != nil {
		t.Fatal(err)
	}
	return b
}

// AudioClips is n seeded clips of uniform noise in ±amplitude for Audio,
// as one float32[n,1,4096] tensor called "audio".
func AudioClips(t testing.TB, seed uint64, n int, amplitude float64) *graph.Tensor {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 1))
	vals := make([]float32, n*AudioSamples)
	for i := range vals {
		vals[i] = float32(amplitude * (2*r.Float64() - 1))
	}
	x, err := graph.NewFloat32Tensor("audio", []int64{int64(n), 1, AudioSamples}, vals)
	if err != nil {
		t.Fatal(err)
	}
	return x
}
