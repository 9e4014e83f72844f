package data

import (
	"fmt"

	"github.com/optc-dev/optc/graph"
)

// fillSource completes the batches of a source that feeds some of the
// inputs (an image folder for the image input, a .npz without the state)
// with synthetic data for the rest: zeros for state, ones for masks, a
// --value for scalars. Their batch axis follows each batch's sample count;
// their named dims take the sizes the data gave the same names.
type fillSource struct {
	inner  Source
	inputs []Input
	fedAt  []int // per input, its index in the inner source's tensors, or -1
	fed    []Input
	opts   Options
	gens   []*randomGen
}

// withFill opens the inputs the data gives with open and fills in the
// others (which must be fillable). fed are the inputs the data gives.
func withFill(where string, inputs, fed []Input, opts Options, open func([]Input) (Source, error)) (Source, error) {
	if len(fed) == len(inputs) {
		return open(inputs)
	}
	s := &fillSource{inputs: inputs, fed: fed, opts: opts, fedAt: make([]int, len(inputs)), gens: make([]*randomGen, len(inputs))}
	for i, in := range inputs {
		s.fedAt[i] = -1
		for j, f := range fed {
			if f.Name == in.Name {
				s.fedAt[i] = j
			}
		}
		if s.fedAt[i] >= 0 {
			continue
		}
		if !fillable(in, opts) {
			return nil, fmt.Errorf("%s: input %q %s is not in the data and is per-sample data (not state, a mask or a scalar); give it in the data, or a constant with --value %s=V", where, in.Name, in, in.Name)
		}
		g, err := newInputGen(in, opts, i)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		s.gens[i] = g
	}
	inner, err := open(fed)
	if err != nil {
		return nil, err
	}
	s.inner = inner
	return s, nil
}

// splitFed returns the inputs a single-input format (.npy, an image folder)
// feeds: the one input that is per-sample random data, when the others can
// be filled in.
func splitFed(inputs []Input, opts Options) []Input {
	var fed []Input
	for _, in := range inputs {
		if !fillable(in, opts) {
			fed = append(fed, in)
		}
	}
	if len(fed) != 1 {
		return inputs
	}
	return fed
}

// Next reads the next batch and fills in the other inputs.
func (s *fillSource) Next() (*Batch, error) {
	b, err := s.inner.Next()
	if err != nil {
		return nil, err
	}
	bind := map[string]int64{}
	for j, t := range b.Tensors {
		for i, d := range s.fed[j].Shape {
			if d.Kind == graph.DimSymbolic && i < len(t.Dims) {
				bind[d.Param] = t.Dims[i]
			}
		}
	}
	out := &Batch{Tensors: make([]*graph.Tensor, len(s.inputs)), Samples: b.Samples}
	bopts := s.opts
	bopts.Batch = b.Samples
	for i, in := range s.inputs {
		if j := s.fedAt[i]; j >= 0 {
			out.Tensors[i] = b.Tensors[j]
			continue
		}
		dims, err := resolveShape(in, bopts, bind)
		if err != nil {
			return nil, fmt.Errorf("filling input %q: %w", in.Name, err)
		}
		count := int64(1)
		for _, d := range dims {
			count *= d
		}
		t, err := graph.NewTensor(in.Name, in.DType, dims, s.gens[i].fill(int(count)))
		if err != nil {
			return nil, fmt.Errorf("filling input %q: %w", in.Name, err)
		}
		out.Tensors[i] = t
	}
	return out, nil
}

// Close closes the inner source.
func (s *fillSource) Close() error { return s.inner.Close() }
