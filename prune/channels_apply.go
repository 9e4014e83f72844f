package prune

import (
	"errors"
	"fmt"
	"slices"

	"github.com/optc-dev/optc/graph"
)

// undoLog reverts what apply changed, newest first.
type undoLog []func() error

// run reverts every step, and says which could not be reverted: the
// model is then not what it was, and pruning must stop.
func (u undoLog) run() error {
	var errs []error
	for i := len(u) - 1; i >= 0; i-- {
		errs = append(errs, u[i]())
	}
	return errors.Join(errs...)
}

// apply removes all but grp.keep: the sources' output
// axis and bias, every recorded consumer, and the declared types of the
// values that carry them.
func (a *analysis) apply(g *graph.Graph, grp *group) (undoLog, []replacement, error) {
	var undo undoLog
	var reps []replacement
	keep := grp.keep
	newC := int64(len(keep))
	// replace slices input i of n along axis, in blocks of block elements.
	replace := func(n *graph.Node, i, axis int, block int64) error {
		old := n.Input(i)
		t := float32Const(old)
		if t == nil {
			return fmt.Errorf("%s input %d is not a constant float32 tensor", n, i)
		}
		nt, err := sliceTensor(t, g.UniqueName(old.Name+"_pruned"), axis, keep, block, grp.channels)
		if err != nil {
			return fmt.Errorf("%s: %w", n, err)
		}
		nv, err := g.AddInitializer(nt)
		if err != nil {
			return err
		}
		n.SetInput(i, nv)
		reps = append(reps, replacement{old, nv})
		undo = append(undo, func() error {
			n.SetInput(i, old)
			if err := g.RemoveInitializer(nv); err != nil {
				return fmt.Errorf("prune channels: undoing %s input %d: %w", n, i, err)
			}
			return nil
		})
		return nil
	}
	for _, s := range grp.sources {
		n := s.node
		axis := 0
		if s.gemm && n.AttrInt("transB", 0) == 0 {
			axis = 1
		}
		if err := replace(n, 1, axis, 1); err != nil {
			return undo, nil, err
		}
		if b := n.Input(2); b != nil {
			t := b.ConstantTensor()
			if s.gemm && (len(t.Dims) == 0 || t.Dims[len(t.Dims)-1] == 1) {
				continue // broadcast over the outputs
			}
			if err := replace(n, 2, len(t.Dims)-1, 1); err != nil {
				return undo, nil, err
			}
		}
	}
	for _, act := range grp.actions {
		n := act.node
		switch act.kind {
		case actSliceInput:
			if err := replace(n, act.input, act.axis, act.block); err != nil {
				return undo, nil, err
			}
		case actDepthwise:
			if err := replace(n, 1, 0, 1); err != nil {
				return undo, nil, err
			}
			if n.Input(2) != nil {
				if err := replace(n, 2, 0, 1); err != nil {
					return undo, nil, err
				}
			}
			old := n.Attr("group")
			n.SetAttr(&graph.Attr{Name: "group", Type: graph.AttrInt, Int: newC})
			undo = append(undo, func() error {
				if old != nil {
					n.SetAttr(old)
				}
				return nil
			})
		}
	}
	// Declared types: the channel axis shrinks.
	seen := map[*graph.Value]bool{}
	setDim := func(v *graph.Value, d int64) {
		if seen[v] || v.Type == nil || v.Type.Kind != graph.KindTensor || len(v.Type.Shape) < 2 {
			return
		}
		seen[v] = true
		old := v.Type
		t := old.Clone()
		t.Shape = slices.Clone(t.Shape)
		if d > 0 {
			t.Shape[1] = graph.StaticDim(d)
		} else {
			t.Shape[1] = graph.Dim{}
		}
		v.Type = t
		undo = append(undo, func() error { v.Type = old; return nil })
	}
	for _, v := range grp.values {
		setDim(v, newC)
	}
	for v, block := range grp.flat {
		setDim(v, newC*block)
	}
	return undo, reps, nil
}

// sliceTensor keeps the given channels of t along axis, where the axis
// holds channels blocks of block elements each.
func sliceTensor(t *graph.Tensor, name string, axis int, keep []int, block, channels int64) (*graph.Tensor, error) {
	if axis < 0 || axis >= len(t.Dims) || t.Dims[axis] != channels*block {
		return nil, fmt.Errorf("tensor %q %v: axis %d does not hold %d×%d", t.Name, t.Dims, axis, channels, block)
	}
	f, err := t.Float32s()
	if err != nil {
		return nil, err
	}
	outer, inner := strides(t.Dims, axis)
	span := int(block) * inner // elements of one channel, per outer index
	out := make([]float32, 0, outer*len(keep)*span)
	for o := 0; o < outer; o++ {
		base := o * int(t.Dims[axis]) * inner
		for _, c := range keep {
			start := base + c*span
			out = append(out, f[start:start+span]...)
		}
	}
	dims := slices.Clone(t.Dims)
	dims[axis] = int64(len(keep)) * block
	return graph.NewFloat32Tensor(name, dims, out)
}

// replacement is one sliced tensor standing in for another.
type replacement struct{ old, new *graph.Value }

// cleanup removes the tensors that slicing replaced (initializers and
// Constant nodes no longer read) and gives the sliced tensors the names
// of the tensors they came from.
func cleanup(g *graph.Graph, reps []replacement) error {
	origin := map[*graph.Value]string{}
	for _, r := range reps {
		if name, ok := origin[r.old]; ok {
			origin[r.new] = name
		} else {
			origin[r.new] = r.old.Name
		}
	}
	unused := func(v *graph.Value) bool {
		return len(v.Uses()) == 0 && !v.IsReturned() && !slices.Contains(g.Inputs, v)
	}
	var dead []*graph.Value
	var deadNodes []*graph.Node
	seen := map[*graph.Value]bool{}
	for _, r := range reps {
		v := r.old
		if seen[v] || !unused(v) {
			continue
		}
		seen[v] = true
		switch p := v.Producer(); {
		case v.Const != nil && slices.Contains(g.Initializers, v):
			dead = append(dead, v)
		case p != nil && p.OpType == "Constant" && p.Graph() == g:
			deadNodes = append(deadNodes, p)
		}
	}
	if err := g.RemoveInitializers(dead); err != nil {
		return fmt.Errorf("prune channels: removing replaced weights: %w", err)
	}
	if len(deadNodes) > 0 {
		if err := g.RemoveNodes(deadNodes); err != nil {
			return fmt.Errorf("prune channels: removing replaced constants: %w", err)
		}
	}
	for _, r := range reps {
		if seen[r.new] {
			continue // replaced again, removed above
		}
		if name := origin[r.new]; g.Value(name) == nil {
			if err := g.Rename(r.new, name); err != nil {
				return fmt.Errorf("prune channels: naming the sliced %s after %s: %w", r.new.Name, name, err)
			}
		}
	}
	return nil
}
