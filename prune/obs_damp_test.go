package prune

import (
	"math"
	"math/rand"
	"slices"
	"testing"

	"github.com/optc-dev/optc/data"
	"github.com/optc-dev/optc/ort"
	"github.com/optc-dev/optc/tools/ortenv"
)

// dampProblem is an OBS problem on cols features (identity layout, no
// bias column, a random column order so that src mapping matters) with
// random dense weights.
func dampProblem(rng *rand.Rand, rows, cols int) *obsProblem {
	lay := &layout{rows: rows, cols: cols, perm: rng.Perm(cols)}
	dense := make([]float64, rows*cols)
	for i := range dense {
		dense[i] = rng.NormFloat64()
	}
	return &obsProblem{lay: lay, cols: cols, dim: cols, dense: dense, keep: make([]bool, cols), ratio: 0.5, nm: true}
}

// correlated draws n vectors of dim features that are mixes of k sources
// plus a little noise, each ending with the constant 1 the Grams carry.
func correlated(rng *rand.Rand, mix []float64, n, dim, k int, noise float64) []float64 {
	out := make([]float64, n*(dim+1))
	for s := 0; s < n; s++ {
		src := make([]float64, k)
		for i := range src {
			src[i] = rng.NormFloat64()
		}
		row := out[s*(dim+1) : (s+1)*(dim+1)]
		for j := 0; j < dim; j++ {
			v := noise * rng.NormFloat64()
			for i := 0; i < k; i++ {
				v += mix[j*k+i] * src[i]
			}
			row[j] = v
		}
		row[dim] = 1
	}
	return out
}

// directError is mean ‖W′x̃ − Wx‖² over explicit vectors (ref nil: x̃ = x).
func directError(o *obsProblem, wp, cur, ref []float64) float64 {
	if ref == nil {
		ref = cur
	}
	d := o.dim + 1
	n := len(cur) / d
	e := 0.0
	for s := 0; s < n; s++ {
		for r := 0; r < o.lay.rows; r++ {
			y := 0.0
			for j := 0; j < o.cols; j++ {
				y += wp[r*o.cols+j]*cur[s*d+o.src(j)] - o.dense[r*o.cols+j]*ref[s*d+o.src(j)]
			}
			e += y * y
		}
	}
	return e / float64(n)
}

func gramOf(cur, ref []float64, dim int) *gram {
	g := newGram(dim+1, ref != nil)
	g.add(cur, ref, len(cur)/(dim+1))
	g.finish()
	return g
}

// TestHeldOutErrorClosedForm: the error from the Grams is the error on the
// vectors, exactly without a reference, and up to tr(W·G·Wᵀ) (a constant
// of the unpruned model) with one.
func TestHeldOutErrorClosedForm(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	const rows, dim, k = 5, 12, 4
	o := dampProblem(rng, rows, dim)
	mix := make([]float64, dim*k)
	for i := range mix {
		mix[i] = rng.NormFloat64()
	}
	cur := correlated(rng, mix, 50, dim, k, 0.1)
	wp := slices.Clone(o.dense)
	for i := range wp {
		wp[i] += 0.3 * rng.NormFloat64()
	}
	got, want := o.heldOutError(wp, gramOf(cur, nil, dim)), directError(o, wp, cur, nil)
	if math.Abs(got-want) > 1e-9*math.Abs(want) {
		t.Errorf("without a reference: %.12g from the Grams, %.12g on the vectors", got, want)
	}
	ref := correlated(rng, mix, 50, dim, k, 0.1)
	refOnly := gramOf(ref, nil, dim)
	constant := o.heldOutError(o.dense, refOnly) // tr(W·G·Wᵀ) − 2tr(W·G·Wᵀ) + tr(W·G·Wᵀ) = 0 ...
	if math.Abs(constant) > 1e-9 {
		t.Fatalf("the unpruned weights have error %.3g on their own inputs", constant)
	}
	// ... so tr(W·G·Wᵀ) is the direct error of zero weights against ref.
	zero := make([]float64, len(wp))
	trWGW := directError(o, zero, ref, ref)
	got = o.heldOutError(wp, gramOf(cur, ref, dim)) + trWGW
	want = directError(o, wp, cur, ref)
	if math.Abs(got-want) > 1e-9*math.Abs(want) {
		t.Errorf("with a reference: %.12g from the Grams, %.12g on the vectors", got, want)
	}
}

// TestChooseDampLeastHeldOut: auto-damping picks the damping whose
// weights, solved on the fit vectors, have the least error on the
// held-out vectors, measured directly on the vectors rather than through
// the Grams, with fewer fit vectors than features and with many.
func TestChooseDampLeastHeldOut(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	const rows, dim = 6, 16
	for _, c := range []struct {
		name    string
		k       int
		fitRows int
		noise   float64
	}{
		{"fewer fit vectors than features", 16, 8, 0.05},
		{"many fit vectors", 16, 400, 0.05},
	} {
		k := c.k
		mix := make([]float64, dim*k)
		for i := range mix {
			mix[i] = rng.NormFloat64()
		}
		o := dampProblem(rng, rows, dim)
		fit := correlated(rng, mix, c.fitRows, dim, k, c.noise)
		val := correlated(rng, mix, 400, dim, k, c.noise)
		fg, vg := gramOf(fit, nil, dim), gramOf(val, nil, dim)
		// Each candidate list in turn: all, without the largest, reversed
		// (so that the pick is the least error, not a position).
		rev := slices.Clone(AutoDamps)
		slices.Reverse(rev)
		for _, damps := range [][]float64{AutoDamps, AutoDamps[:3], rev} {
			best, bestErr := 0.0, math.Inf(1)
			var errs []float64
			for _, damp := range damps {
				wp, err := o.solve(fg, damp)
				if err != nil {
					t.Fatal(err)
				}
				e := directError(o, wp, val, nil)
				errs = append(errs, e)
				if e < bestErr {
					best, bestErr = damp, e
				}
			}
			got, err := o.chooseDamp(fg, vg, damps)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: held-out errors %.4g at %v: chose %g", c.name, errs, damps, got)
			if slices.Min(errs) > 0.95*slices.Max(errs) {
				t.Errorf("%s: the dampings differ too little to tell: %.4g", c.name, errs)
			}
			if got != best {
				t.Errorf("%s: chose %g among %v, the least held-out error is at %g", c.name, got, damps, best)
			}
		}
	}
}

// TestAutoDampDeterministic: OBS with AutoDamp in ORT writes the same bytes
// twice and reports a damping from AutoDamps for each layer it prunes.
func TestAutoDampDeterministic(t *testing.T) {
	ortenv.Require(t)
	rng := rand.New(rand.NewSource(2))
	model := mixedInputs(t, rng)
	calib := randomNpy(t, rng, 64, 4, 6, 6)
	d := &Data{Spec: calib, Opts: data.Options{Batch: 16}, Session: ort.DefaultOptions(), AutoDamp: true}
	opts := Options{MinElements: 100, Data: d}
	rep, a := pruneBytesWith(t, model, Method{Kind: "2:4"}, opts)
	_, b := pruneBytesWith(t, model, Method{Kind: "2:4"}, opts)
	if string(a) != string(b) {
		t.Errorf("two runs wrote different bytes")
	}
	for _, l := range rep.Layers {
		if l.Skipped == "" && (l.Refit != "obs" || !slices.Contains(AutoDamps, l.Damp)) {
			t.Errorf("layer %s: refit %q, damp %g", l.Node, l.Refit, l.Damp)
		}
		t.Logf("layer %s: refit %q, damp %g", l.Node, l.Refit, l.Damp)
	}
}
