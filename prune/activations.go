package prune

import (
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/optc-dev/optc/data"
	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/ort"
)

// Data is the calibration data the data-driven methods (reconstruction
// after channel pruning, OBS updates for 2:4 and magnitude) run the model
// on in ONNX Runtime. Only fixed-size statistics are kept between batches,
// so memory does not grow with the number of samples.
type Data struct {
	Spec    string       // what data.Open reads: .npy, .npz, .pb folder, images
	Opts    data.Options // batch, samples, shapes
	Session ort.Options
	ORTLib  string
	// Damp is the fraction of the Gram diagonal's mean added to it before
	// solving (0: DefaultDamp).
	Damp float64
	// AutoDamp makes OBS (2:4, magnitude:S) choose each layer's damping
	// among AutoDamps from the calibration data itself (see obsLayer);
	// channel reconstruction then uses Damp.
	AutoDamp bool
}

// AutoDamps are the dampings AutoDamp chooses among.
var AutoDamps = []float64{0.001, 0.003, 0.01, 0.03, 0.1}

// holdoutEvery: with AutoDamp, every holdoutEvery-th calibration sample
// (by its position in the draw, so deterministic) is held out to judge
// the dampings; the others are solved on.
const holdoutEvery = 4

// DefaultDamp is Data.Damp's default.
const DefaultDamp = 0.01

func (d *Data) damp() float64 {
	if d.Damp > 0 {
		return d.Damp
	}
	return DefaultDamp
}

// runner runs a model in ORT with some of its values exposed as outputs.
type runner struct {
	sess   *ort.Session
	inputs map[string]int // graph input name -> position
	outs   map[string]int // exposed value -> session output
}

func newRunner(m *graph.Model, values []string, opts ort.Options) (*runner, error) {
	ins, _ := ort.Interface(m)
	r := &runner{inputs: map[string]int{}, outs: map[string]int{}}
	for i, in := range ins {
		r.inputs[in.Name] = i
	}
	var expose []string
	for _, v := range values {
		if _, ok := r.inputs[v]; !ok && !slices.Contains(expose, v) {
			expose = append(expose, v)
		}
	}
	clone, err := m.Clone()
	if err != nil {
		return nil, err
	}
	if err := graph.ExposeValues(clone, expose); err != nil {
		return nil, err
	}
	src, err := ort.SourceOf(clone)
	if err != nil {
		return nil, err
	}
	if r.sess, err = ort.NewSession(src, opts); err != nil {
		return nil, err
	}
	for i, o := range r.sess.Outputs {
		r.outs[o.Name] = i
	}
	return r, nil
}

// run returns the values asked for, by name.
func (r *runner) run(batch []*graph.Tensor, values []string) (map[string]*graph.Tensor, error) {
	outs, err := r.sess.Run(batch)
	if err != nil {
		return nil, err
	}
	res := map[string]*graph.Tensor{}
	for _, v := range values {
		if i, ok := r.inputs[v]; ok {
			res[v] = batch[i]
		} else {
			res[v] = outs[r.outs[v]]
		}
	}
	return res, nil
}

// stream runs cur (and ref, when not nil) over the data, batch by batch,
// and hands fn the named values of each, with the number of the batch's
// first sample.
func (d *Data) stream(cur, ref *graph.Model, values []string, fn func(cur, ref map[string]*graph.Tensor, sample int64) error) error {
	if _, err := ort.Init(d.ORTLib); err != nil {
		return err
	}
	rc, err := newRunner(cur, values, d.Session)
	if err != nil {
		return fmt.Errorf("calibration run: %w", err)
	}
	defer rc.sess.Close()
	var rr *runner
	if ref != nil {
		if rr, err = newRunner(ref, values, d.Session); err != nil {
			return fmt.Errorf("calibration run of the unpruned model: %w", err)
		}
		defer rr.sess.Close()
	}
	src, err := data.Open(d.Spec, data.GraphInputs(cur.Graph), d.Opts)
	if err != nil {
		return err
	}
	defer src.Close()
	var sample int64
	for b := 0; ; b++ {
		batch, err := src.Next()
		if errors.Is(err, io.EOF) {
			if b == 0 {
				return fmt.Errorf("calibration data %s is empty", d.Spec)
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("calibration data %s: batch %d: %w", d.Spec, b, err)
		}
		vc, err := rc.run(batch.Tensors, values)
		if err != nil {
			return fmt.Errorf("calibration data %s: batch %d: %w", d.Spec, b, err)
		}
		var vr map[string]*graph.Tensor
		if rr != nil {
			if vr, err = rr.run(batch.Tensors, values); err != nil {
				return fmt.Errorf("calibration data %s: batch %d (unpruned model): %w", d.Spec, b, err)
			}
		}
		if err := fn(vc, vr, sample); err != nil {
			return fmt.Errorf("calibration data %s: batch %d: %w", d.Spec, b, err)
		}
		sample += int64(batch.Samples)
	}
}

// inputGrams runs the model (and the reference) and accumulates, for each
// layer, the Gram of its input vectors (see gram). layers maps the value a
// layer reads to its patcher; several layers may read one value with
// different patchers, so keys are layer names.
type layerInput struct {
	name  string // the layer (node) name
	value string // the activation it reads
	p     *patcher
	g     *gram
	// With holdout, g gets the samples solved on and val every
	// holdoutEvery-th sample (see Data.AutoDamp).
	holdout bool
	val     *gram
}

func (d *Data) inputGrams(cur, ref *graph.Model, layers []*layerInput) error {
	var values []string
	for _, l := range layers {
		if !slices.Contains(values, l.value) {
			values = append(values, l.value)
		}
		l.g = newGram(l.p.dim+1, ref != nil)
		if l.holdout {
			l.val = newGram(l.p.dim+1, ref != nil)
		}
	}
	err := d.stream(cur, ref, values, func(vc, vr map[string]*graph.Tensor, sample int64) error {
		for _, l := range layers {
			xc, err := floats(vc[l.value])
			if err != nil {
				return fmt.Errorf("value %q: %w", l.value, err)
			}
			pc, r, err := l.p.vectors(xc, vc[l.value].Dims, sample)
			if err != nil {
				return fmt.Errorf("%s reads %q: %w", l.name, l.value, err)
			}
			var pr []float64
			if vr != nil {
				xr, err := floats(vr[l.value])
				if err != nil {
					return fmt.Errorf("value %q: %w", l.value, err)
				}
				if pr, _, err = l.p.vectors(xr, vr[l.value].Dims, sample); err != nil {
					return fmt.Errorf("%s reads %q in the unpruned model: %w", l.name, l.value, err)
				}
			}
			if !l.holdout {
				l.g.add(pc, pr, r)
				continue
			}
			// Rows are sample-major: split them by sample.
			n := int(vc[l.value].Dims[0])
			per := r / max(n, 1)
			if per*n != r {
				return fmt.Errorf("%s reads %q: %d vectors from %d samples", l.name, l.value, r, n)
			}
			d := l.p.dim + 1
			for s := 0; s < n; s++ {
				g := l.g
				if (sample+int64(s))%holdoutEvery == holdoutEvery-1 {
					g = l.val
				}
				var prs []float64
				if pr != nil {
					prs = pr[s*per*d : (s+1)*per*d]
				}
				g.add(pc[s*per*d:(s+1)*per*d], prs, per)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, l := range layers {
		l.g.finish()
		if l.val != nil {
			l.val.finish()
		}
	}
	return nil
}

func floats(t *graph.Tensor) ([]float32, error) {
	if t == nil {
		return nil, fmt.Errorf("not computed")
	}
	if t.DType != graph.Float {
		return nil, fmt.Errorf("%s, not float32", t.DType)
	}
	return t.Float32s()
}
