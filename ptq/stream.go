package ptq

import (
	"errors"
	"fmt"
	"io"
	"runtime"

	"github.com/optc-dev/optc/calibrate"
	"github.com/optc-dev/optc/data"
	"github.com/optc-dev/optc/graph"
)

// streamValues runs each model over the calibration data and hands fn,
// value by value, the named value of every model for the same batch (the
// models share those names: a float model and its INT8 form). Values are
// fetched a group at a time, as calibration fetches them
// (calibrate.SplitByBytes at Calib.MaxRunBytes), so memory stays flat in
// the samples and in the model's activations.
func streamValues(opts Options, models []*graph.Model, names []string, fn func(name string, vals []*graph.Tensor) error) error {
	src, err := data.Open(opts.CalibData, data.GraphInputs(models[0].Graph), opts.CalibOpts)
	if err != nil {
		return err
	}
	defer src.Close()
	inputIndex := map[string]int{}
	for i, in := range data.GraphInputs(models[0].Graph) {
		inputIndex[in.Name] = i
	}
	var expose []string
	for _, n := range names {
		if _, ok := inputIndex[n]; !ok {
			expose = append(expose, n)
		}
	}
	batch, err := src.Next()
	if errors.Is(err, io.EOF) {
		return fmt.Errorf("calibration data %s is empty", opts.CalibData)
	}
	if err != nil {
		return fmt.Errorf("calibration data %s: batch 0: %w", opts.CalibData, err)
	}
	limit := opts.Calib.MaxRunBytes
	if limit <= 0 {
		limit = calibrate.DefaultMaxRunBytes
	}
	var groups [][]string
	if len(expose) > 0 {
		if groups, err = calibrate.SplitByBytes(models[0], expose, batch.Tensors, limit); err != nil {
			return err
		}
	}
	parts := make([]*calibrate.Parts, len(models))
	defer func() {
		for _, p := range parts {
			if p != nil {
				p.Close()
			}
		}
	}()
	for i, m := range models {
		if len(groups) == 0 {
			break
		}
		if parts[i], err = calibrate.OpenParts(m, groups, opts.Calib.Session); err != nil {
			return err
		}
	}
	for b := 0; !errors.Is(err, io.EOF); b++ {
		if err != nil {
			return fmt.Errorf("calibration data %s: batch %d: %w", opts.CalibData, b, err)
		}
		for _, n := range names {
			if i, ok := inputIndex[n]; ok {
				vals := make([]*graph.Tensor, len(models))
				for j := range vals {
					vals[j] = batch.Tensors[i]
				}
				if err := fn(n, vals); err != nil {
					return err
				}
			}
		}
		for g, group := range groups {
			outs := make([][]*graph.Tensor, len(models))
			for i, p := range parts {
				if outs[i], err = p.Run(g, batch.Tensors); err != nil {
					return fmt.Errorf("calibration data %s: batch %d: %w", opts.CalibData, b, err)
				}
			}
			for j, n := range group {
				vals := make([]*graph.Tensor, len(models))
				for i := range models {
					vals[i] = outs[i][j]
				}
				if err := fn(n, vals); err != nil {
					return err
				}
			}
			outs = nil
			runtime.GC()
		}
		batch, err = src.Next()
	}
	return nil
}
