package ptq

import (
	"crypto/sha256"
	"fmt"

	"github.com/optc-dev/optc/compare"
	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/placement"
	"github.com/optc-dev/optc/report/schema"
)

// place applies opts.Placement to the accuracy-valid INT8 settings (the
// layers accuracy control kept float stay float): all-int8 keeps the model
// as it is, auto measures, anything else is a placement.json to replay. A
// placement that keeps more regions float is re-measured so that the
// reported accuracy is the written model's.
func place(opts Options, float graph.Serialized, ranges map[string][2]float64, batches []int, res *Result,
	measure func(graph.Serialized) (*compare.Result, error)) (*graph.Model, graph.Serialized, graph.Serialized, error) {
	po := placement.Options{Float: float, Ranges: ranges, Quant: excluding(opts.Quant, res.FellBack),
		Session: opts.Session, Inputs: opts.Inputs, Budget: opts.PlacementBudget,
		CPU: opts.CPU, CPUFlags: opts.CPUFlags, Batches: batches, Progress: opts.Progress}
	var err error
	measure = measuredOnce(measure)
	guarded := res.Accuracy != nil && !res.Guard.Allowed
	if guarded {
		po.Accept = func(b graph.Serialized) (bool, error) {
			r, err := measure(b)
			return err == nil && opts.meets(r), err
		}
	}
	var f *schema.Placement
	switch opts.Placement {
	case schema.ModeAllINT8:
		f, _, err = placement.AllINT8(po)
	case schema.ModeAuto:
		f, _, err = placement.Search(po)
	default:
		var from *schema.Placement
		if from, err = placement.ReadFile(opts.Placement); err == nil {
			if f, _, err = placement.Replay(po, from); err != nil {
				err = fmt.Errorf("replaying %s: %w", opts.Placement, err)
			}
		}
		res.PlacementFrom = opts.Placement
	}
	if err != nil {
		return nil, graph.Serialized{}, graph.Serialized{}, fmt.Errorf("placement: %w", err)
	}
	res.Placement = f
	// The candidates were quantized from the float model with its conv
	// channels padded when the search chose that (schema.Alignment):
	// so is the model written, and the per-tensor SQNR pairs it with that
	// model's tensors.
	if float, ranges, po.Quant, err = placement.Aligned(f, float, ranges, po.Quant); err != nil {
		return nil, graph.Serialized{}, graph.Serialized{}, fmt.Errorf("placement: %w", err)
	}
	padded := f.Aligned != nil && f.Aligned.Chosen
	if placement.IsAlternative(f.Chosen) {
		// A whole-model candidate (dynamic INT8): its model, not the
		// static one with regions kept float.
		q, rep, err := placement.Build(f.Chosen, float, ranges, po.Quant)
		if err == nil && rep == nil {
			err = fmt.Errorf("%s does not apply to this model", f.Chosen)
		}
		if err != nil {
			return nil, graph.Serialized{}, graph.Serialized{}, fmt.Errorf("placement: %w", err)
		}
		b, err := graph.MarshalReferencing(q)
		if err != nil {
			return nil, graph.Serialized{}, graph.Serialized{}, err
		}
		res.Quantize = rep
		if res.Accuracy != nil {
			if res.Accuracy, err = measure(b); err != nil {
				return nil, graph.Serialized{}, graph.Serialized{}, err
			}
			res.Guard.Checks = opts.checks(res.Accuracy)
			if guarded && !opts.meets(res.Accuracy) {
				return nil, graph.Serialized{}, graph.Serialized{}, fmt.Errorf("placement: the %s model misses the accuracy guard", f.Chosen)
			}
		}
		return q, b, float, nil
	}
	quant := po.Quant
	quant.KeepFloat = f.KeepFloat()
	q, b, rep, err := quantizeWith(float, ranges, quant)
	if err != nil {
		return nil, graph.Serialized{}, graph.Serialized{}, err
	}
	res.Quantize = rep
	if res.Accuracy != nil && (len(quant.KeepFloat) > 0 || padded) {
		if res.Accuracy, err = measure(b); err != nil {
			return nil, graph.Serialized{}, graph.Serialized{}, err
		}
		res.Guard.Checks = opts.checks(res.Accuracy)
		if guarded && !opts.meets(res.Accuracy) {
			return nil, graph.Serialized{}, graph.Serialized{}, fmt.Errorf("placement: the placed INT8 model (%d regions kept float) misses the accuracy guard", len(quant.KeepFloat))
		}
	}
	return q, b, float, nil
}

// measuredOnce remembers measure's results by the model's bytes: the model
// the search checked and chose is checked once, not again for the report.
func measuredOnce(measure func(graph.Serialized) (*compare.Result, error)) func(graph.Serialized) (*compare.Result, error) {
	type key struct {
		sum [sha256.Size]byte
		dir string
	}
	seen := map[key]*compare.Result{}
	return func(b graph.Serialized) (*compare.Result, error) {
		k := key{sha256.Sum256(b.Bytes), b.Dir}
		if r, ok := seen[k]; ok {
			return r, nil
		}
		r, err := measure(b)
		if err == nil {
			seen[k] = r
		}
		return r, err
	}
}
