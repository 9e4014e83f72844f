package ptq

import (
	"errors"
	"fmt"
	"io"
	"runtime"

	"github.com/optc-dev/optc/calibrate"
	"github.com/optc-dev/optc/data"
	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/ort"
)

// streamValues runs each model over the calibration data and hands fn,
// value by value, the named value of every model for the same batch (the
// models share those names: a float model and its INT8 form). Values are
// fetched a group at a time, as calibration fetches them
// (calibrate.SplitByBytes at Calib.MaxRunBytes), so memory stays flat in
// the samples and in the model's activations (see runGroups). fn sees
// each name's batches in the data's order.
func streamValues(opts Options, models []*graph.Model, names []string, fn func(name string, vals []*graph.Tensor) error) error {
	inputs := data.GraphInputs(models[0].Graph)
	inputIndex := map[string]int{}
	for i, in := range inputs {
		inputIndex[in.Name] = i
	}
	var expose, fed []string
	for _, n := range names {
		if _, ok := inputIndex[n]; ok {
			fed = append(fed, n)
		} else {
			expose = append(expose, n)
		}
	}
	var groups [][]string
	err := forBatches(opts.CalibData, inputs, opts.CalibOpts, func(b int, batch *data.Batch) error {
		for _, n := range fed {
			vals := make([]*graph.Tensor, len(models))
			for j := range vals {
				vals[j] = batch.Tensors[inputIndex[n]]
			}
			if err := fn(n, vals); err != nil {
				return err
			}
		}
		if b > 0 || len(expose) == 0 {
			return nil
		}
		limit := opts.Calib.MaxRunBytes
		if limit <= 0 {
			limit = calibrate.DefaultMaxRunBytes
		}
		var err error
		groups, err = calibrate.SplitByBytes(models[0], expose, batch.Tensors, limit)
		return err
	})
	if err != nil {
		return err
	}
	perModel := make([][][]string, len(groups))
	for i, g := range groups {
		for range models {
			perModel[i] = append(perModel[i], g)
		}
	}
	return runGroups(opts.CalibData, opts.CalibOpts, opts.Calib.Session, models, perModel, func(g, _ int, outs [][]*graph.Tensor) error {
		for j, n := range groups[g] {
			vals := make([]*graph.Tensor, len(models))
			for i := range models {
				vals[i] = outs[i][j]
			}
			if err := fn(n, vals); err != nil {
				return err
			}
		}
		return nil
	})
}

// forBatches hands fn every batch of spec's data, read from its start.
func forBatches(spec string, inputs []data.Input, dopts data.Options, fn func(b int, batch *data.Batch) error) error {
	src, err := data.Open(spec, inputs, dopts)
	if err != nil {
		return err
	}
	defer src.Close()
	for b := 0; ; b++ {
		batch, err := src.Next()
		if errors.Is(err, io.EOF) {
			if b == 0 {
				return fmt.Errorf("%s: no samples", spec)
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: batch %d: %w", spec, b, err)
		}
		if err := fn(b, batch); err != nil {
			return err
		}
	}
}

// runGroups runs the data through the models group by group: for group g,
// a session per model that fetches groups[g][m] (model m's names) and
// computes nothing else (calibrate.OpenParts), over every batch, then the
// next group. fn gets each batch's values, outs[m][j] for
// groups[g][m][j]. One group's sessions are open at a time: each holds
// the part of its model the group needs, and all of them open at once
// held a ResNet-50's weights many times over. With several groups the
// sessions do without ORT's arena and the freed pages go back after every
// run (ort.TrimMemory), so the peak is one run's.
func runGroups(spec string, dopts data.Options, session ort.Options, models []*graph.Model, groups [][][]string, fn func(g, b int, outs [][]*graph.Tensor) error) error {
	split := len(groups) > 1
	if split {
		session.NoMemArena = true
	}
	inputs := data.GraphInputs(models[0].Graph)
	for g, names := range groups {
		if err := runGroup(spec, dopts, session, models, inputs, names, split, func(b int, outs [][]*graph.Tensor) error {
			return fn(g, b, outs)
		}); err != nil {
			return err
		}
		ort.TrimMemory() // the closed sessions' weights
	}
	return nil
}

func runGroup(spec string, dopts data.Options, session ort.Options, models []*graph.Model, inputs []data.Input, names [][]string, trim bool, fn func(b int, outs [][]*graph.Tensor) error) error {
	parts := make([]*calibrate.Parts, len(models))
	defer func() {
		for _, p := range parts {
			if p != nil {
				p.Close()
			}
		}
	}()
	for i, m := range models {
		var err error
		if parts[i], err = calibrate.OpenParts(m, [][]string{names[i]}, session); err != nil {
			return err
		}
	}
	return forBatches(spec, inputs, dopts, func(b int, batch *data.Batch) error {
		outs := make([][]*graph.Tensor, len(models))
		for i, p := range parts {
			var err error
			if outs[i], err = p.Run(0, batch.Tensors); err != nil {
				return fmt.Errorf("%s: batch %d: %w", spec, b, err)
			}
		}
		if err := fn(b, outs); err != nil {
			return err
		}
		outs = nil
		runtime.GC()
		if trim {
			ort.TrimMemory()
		}
		return nil
	})
}
