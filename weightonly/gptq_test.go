package weightonly

import (
	"bytes"
	"math"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/optc-dev/optc/data"
	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/ort"
	"github.com/optc-dev/optc/prune"
	"github.com/optc-dev/optc/tools/ortenv"
	"github.com/optc-dev/optc/tools/testgraph"
)

// mlp is x[·, 128] -> MatMul 128x256 -> Relu -> MatMul 256x64, seeded.
func mlp(t *testing.T) *graph.Model {
	b := testgraph.New(t, "mlp", 17)
	x := b.Input("x", 8, 128)
	rng := rand.New(rand.NewPCG(7, 7))
	w := func(name string, k, n int) *graph.Value {
		v := make([]float32, k*n)
		for i := range v {
			v[i] = float32(rng.NormFloat64() / math.Sqrt(float64(k)))
		}
		return b.Floats(name, []int64{int64(k), int64(n)}, v...)
	}
	h := b.Node("fc1", "MatMul", x, w("w1", 128, 256))
	r := b.Node("relu", "Relu", h.Output(0))
	y := b.Node("fc2", "MatMul", r.Output(0), w("w2", 256, 64))
	b.Output(y.Output(0), 8, 64)
	return b.Model
}

// correlated draws n rows of 128 features that are mixtures of 16 latent
// factors with very different scales: the inputs GPTQ exploits (real
// activations are far from white).
func correlated(n int, seed uint64) *graph.Tensor {
	rng := rand.New(rand.NewPCG(99, 99)) // the mixing is fixed
	mix := make([]float64, 16*128)
	for i := range mix {
		mix[i] = rng.NormFloat64()
	}
	rng = rand.New(rand.NewPCG(seed, seed))
	xs := make([]float32, n*128)
	for r := 0; r < n; r++ {
		for f := 0; f < 16; f++ {
			z := rng.NormFloat64() * float64(f+1) / 4
			for j := 0; j < 128; j++ {
				xs[r*128+j] += float32(z * mix[f*128+j])
			}
		}
		for j := 0; j < 128; j++ {
			xs[r*128+j] += float32(0.05 * rng.NormFloat64())
		}
	}
	t, _ := graph.NewFloat32Tensor("x", []int64{int64(n), 128}, xs)
	return t
}

// TestGPTQBeatsRTN quantizes a two-layer MLP to int3 and int4 with RTN and
// with GPTQ (calibration data in ORT) and compares the output error on
// held-out inputs in ORT: GPTQ must be clearly better.
func TestGPTQBeatsRTN(t *testing.T) {
	ortenv.Require(t)
	calib := filepath.Join(t.TempDir(), "calib.npy")
	if err := data.WriteNpy(calib, correlated(256, 1)); err != nil {
		t.Fatal(err)
	}
	held := correlated(8, 2)
	ref := run(t, mlp(t), held, ort.LevelDisable)
	errOf := func(m *graph.Model) float64 {
		got := run(t, m, held, ort.LevelAll)
		var num, den float64
		for i := range ref {
			d := float64(got[i] - ref[i])
			num += d * d
			den += float64(ref[i]) * float64(ref[i])
		}
		return math.Sqrt(num / den)
	}
	for _, typ := range Types {
		var errs [2]float64
		for i, r := range Roundings {
			m := mlp(t)
			o := Options{Type: typ, Rounding: r, MinElements: 1}
			if r == GPTQ {
				o.Data = &prune.Data{Spec: calib, Opts: data.Options{Batch: 8}, Session: ort.DefaultOptions()}
			}
			rep, err := Quantize(m, o)
			if err != nil {
				t.Fatal(err)
			}
			if rep.Quantized != 2 {
				t.Fatalf("%s %s: %+v", typ, r, rep)
			}
			for _, l := range rep.Layers {
				if l.Rounding != string(r) || (r == GPTQ) != (l.OutputError > 0) {
					t.Fatalf("%s %s: layer %+v", typ, r, l)
				}
			}
			errs[i] = errOf(m)
		}
		t.Logf("%s: held-out relative output error rtn %.4f, gptq %.4f", typ, errs[0], errs[1])
		if !(errs[1] < 0.8*errs[0]) {
			t.Errorf("%s: gptq error %.4f is not clearly below rtn's %.4f", typ, errs[1], errs[0])
		}
	}
}

// TestDeterministic: the same model and options give the same bytes, for
// RTN and for GPTQ (whose Grams come from ORT runs).
func TestDeterministic(t *testing.T) {
	ortenv.Require(t)
	calib := filepath.Join(t.TempDir(), "calib.npy")
	if err := data.WriteNpy(calib, correlated(64, 1)); err != nil {
		t.Fatal(err)
	}
	for _, r := range Roundings {
		var out [2][]byte
		for i := range out {
			m := mlp(t)
			o := Options{Type: Int4, Rounding: r, MinElements: 1}
			if r == GPTQ {
				o.Data = &prune.Data{Spec: calib, Opts: data.Options{Batch: 8}, Session: ort.DefaultOptions()}
			}
			if _, err := Quantize(m, o); err != nil {
				t.Fatal(err)
			}
			b, err := graph.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			out[i] = b
		}
		if !bytes.Equal(out[0], out[1]) {
			t.Errorf("%s: two runs wrote different models", r)
		}
	}
}
