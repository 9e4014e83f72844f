package ptq

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"

	"github.com/optc-dev/optc/compare"
	"github.com/optc-dev/optc/data"
	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/internal/jsonfloat"
	"github.com/optc-dev/optc/ort"
)

// TensorSQNR is how faithfully one quantized activation is represented:
// 10 log10(sum x^2 / sum (x - dq(q(x)))^2) over evaluation samples, where x
// is the float model's tensor and dq(q(x)) what the INT8 model computes at
// the same place, over the finite pairs. Identical tensors are capped at
// MaxSQNR; a tensor that is zero in float but not in INT8, or NaN/Inf in
// INT8 where float is finite, is -Inf; one with no finite pair NaN.
type TensorSQNR struct {
	Tensor string          `json:"tensor"`
	SQNRdB jsonfloat.Float `json:"sqnr_db"`
}

// MaxSQNR stands for an exact match (infinite SQNR).
const MaxSQNR = 200.0

// sqnrSamples is how many evaluation samples the per-tensor SQNR uses.
const sqnrSamples = 32

// tensorSQNR pairs every activation Q/DQ of the INT8 model with the float
// tensor it quantizes, runs both models on one batch of the evaluation data
// with those values exposed, and returns the SQNR of each, worst first.
func tensorSQNR(opts Options, float, int8Model graph.Serialized, spec string, dopts data.Options) ([]TensorSQNR, error) {
	fm, err := float.Parse()
	if err != nil {
		return nil, err
	}
	qm, err := int8Model.Parse()
	if err != nil {
		return nil, err
	}
	var xs, dqs []string
	for _, n := range qm.Graph.Nodes {
		if n.OpType != "DequantizeLinear" {
			continue
		}
		q := n.Input(0).Producer()
		if q == nil || q.OpType != "QuantizeLinear" || fm.Graph.Value(q.Input(0).Name) == nil || slices.Contains(xs, q.Input(0).Name) {
			continue
		}
		xs, dqs = append(xs, q.Input(0).Name), append(dqs, n.Output(0).Name)
	}
	if len(xs) == 0 {
		return nil, nil
	}
	if err := graph.ExposeValues(fm, xs); err != nil {
		return nil, err
	}
	if err := graph.ExposeValues(qm, dqs); err != nil {
		return nil, err
	}
	dopts.Samples, dopts.Batch = sqnrSamples, sqnrSamples
	if b := data.StaticBatch(data.GraphInputs(fm.Graph), dopts.Spec); b > 0 {
		// A model with a fixed batch size gets one batch of that size.
		dopts.Samples, dopts.Batch = b, b
	}
	src, err := data.Open(spec, data.GraphInputs(fm.Graph), dopts)
	if err != nil {
		return nil, err
	}
	defer src.Close()
	batch, err := src.Next()
	if errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%s: no samples", spec)
	}
	if err != nil {
		return nil, err
	}
	fv, err := runExposed(fm, batch, xs, opts.Session)
	if err != nil {
		return nil, fmt.Errorf("float model: %w", err)
	}
	qv, err := runExposed(qm, batch, dqs, opts.Session)
	if err != nil {
		return nil, fmt.Errorf("INT8 model: %w", err)
	}
	out := make([]TensorSQNR, len(xs))
	for i := range xs {
		// compare's SNR is the same ratio, over the finite pairs.
		acc := compare.NewAccumulator(xs[i], math.Inf(1), 0, compare.StatMax)
		if err := acc.Add(fv[i], qv[i], nil); err != nil {
			return nil, err
		}
		st := acc.Result()
		s := min(float64(st.SNRdB), MaxSQNR) // NaN (nothing finite) stays NaN
		if st.NewNonFinite > 0 {
			s = math.Inf(-1) // infinite noise where the float tensor is finite
		}
		out[i] = TensorSQNR{Tensor: xs[i], SQNRdB: jsonfloat.Float(s)}
	}
	slices.SortStableFunc(out, func(a, b TensorSQNR) int {
		return cmp.Compare(a.SQNRdB, b.SQNRdB) // NaN first
	})
	return out, nil
}

// runExposed runs m on one batch and returns the named outputs as float32.
func runExposed(m *graph.Model, batch *data.Batch, names []string, sess ort.Options) ([][]float32, error) {
	src, err := ort.SourceOf(m)
	if err != nil {
		return nil, err
	}
	s, err := ort.NewSession(src, sess)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	got, err := s.Run(batch.Tensors)
	if err != nil {
		return nil, err
	}
	res := make([][]float32, len(names))
	for i, name := range names {
		k := slices.IndexFunc(src.Outputs, func(o ort.IO) bool { return o.Name == name })
		if res[i], err = got[k].Float32s(); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
	}
	return res, nil
}
