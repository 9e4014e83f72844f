package ptq

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/optc-dev/optc/calibrate"
	"github.com/optc-dev/optc/compare"
	"github.com/optc-dev/optc/data"
	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/internal/jsonfloat"
	"github.com/optc-dev/optc/internal/parallel"
	"github.com/optc-dev/optc/report/schema"
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

// sqnrOf is the SQNR an accumulator measured, capped at MaxSQNR: -Inf
// where INT8 is NaN/Inf and float finite (infinite noise), NaN when
// nothing was finite.
func sqnrOf(acc *compare.Accumulator) jsonfloat.Float {
	st := acc.Result()
	if st.NewNonFinite > 0 {
		return jsonfloat.Float(math.Inf(-1))
	}
	return jsonfloat.Float(min(float64(st.SNRdB), schema.MaxSQNR)) // NaN stays NaN
}

// sqnrRunBytes bounds what one SQNR run fetches, per model. Both models'
// values of a group are held at once, each with its float32 copy, so a
// quarter of calibration's bound keeps them to about what one calibration
// run holds; a part computes only what its group needs (calibrate.OpenParts),
// so the extra parts cost less than extra whole-model runs.
var sqnrRunBytes int64 = calibrate.DefaultMaxRunBytes / 4 // a var so a test can split finer

// sqnrSamples is how many evaluation samples the per-tensor SQNR uses,
// run sqnrBatch at a time.
const sqnrSamples, sqnrBatch = 32, 8

// tensorSQNR pairs every activation Q/DQ of the INT8 model with the float
// tensor it quantizes, runs both models on sqnrSamples of the evaluation
// data with those values exposed, and returns the SQNR of each, worst
// first.
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
	// Both models' values for sqnrSamples samples would be the largest
	// thing a build holds (about 9 GiB for PaddleOCR det at 320x320), so
	// the samples run in batches of sqnrBatch and the values in groups of
	// at most sqnrRunBytes per run; each tensor's sums
	// take its elements in the same order as from one run of all samples.
	dopts.Samples, dopts.Batch = sqnrSamples, sqnrBatch
	if b := data.StaticBatch(data.GraphInputs(fm.Graph), dopts.Spec); b > 0 {
		// A model with a fixed batch size gets one batch of that size.
		dopts.Samples, dopts.Batch = b, b
	}
	var groups [][]string
	err = forBatches(spec, data.GraphInputs(fm.Graph), dopts, func(b int, batch *data.Batch) error {
		if b == 0 {
			groups, err = calibrate.SplitByBytes(fm, xs, batch.Tensors, sqnrRunBytes)
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("float model: %w", err)
	}
	pair := map[string]string{}
	for i, x := range xs {
		pair[x] = dqs[i]
	}
	// Per group, the float model's tensors and the INT8 model's at the
	// same places.
	both := make([][][]string, len(groups))
	for i, g := range groups {
		var q []string
		for _, x := range g {
			q = append(q, pair[x])
		}
		both[i] = [][]string{g, q}
	}
	// compare's SNR is the same ratio, over the finite pairs.
	accs := map[string]*compare.Accumulator{}
	for _, x := range xs {
		accs[x] = compare.NewAccumulator(x, math.Inf(1), 0, compare.StatMax)
	}
	tick := opts.counter("per-tensor SQNR: groups of tensors", len(groups))
	err = runGroups(spec, dopts, opts.Session, []*graph.Model{fm, qm}, both, func(i, _ int, outs [][]*graph.Tensor) error {
		tick(i)
		g, fv, qv := groups[i], outs[0], outs[1]
		// Each tensor has its own accumulator: they are filled side by
		// side, each taking its batches in order.
		return parallel.For(len(g), func(j int) error {
			f, err := fv[j].Float32s()
			if err != nil {
				return fmt.Errorf("%s: %w", g[j], err)
			}
			q, err := qv[j].Float32s()
			if err != nil {
				return fmt.Errorf("%s: %w", both[i][1][j], err)
			}
			// The float32 copies are per tensor; the runs' values go as
			// soon as they are read.
			fv[j], qv[j] = nil, nil
			return accs[g[j]].Add(f, q, nil)
		})
	})
	if err != nil {
		return nil, err
	}
	out := make([]TensorSQNR, len(xs))
	for i, x := range xs {
		out[i] = TensorSQNR{Tensor: x, SQNRdB: sqnrOf(accs[x])}
	}
	slices.SortStableFunc(out, func(a, b TensorSQNR) int {
		return cmp.Compare(a.SQNRdB, b.SQNRdB) // NaN first
	})
	return out, nil
}
