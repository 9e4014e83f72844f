package benchsuite

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"time"

	"github.com/optc-dev/optc/build"
	"github.com/optc-dev/optc/config"
	"github.com/optc-dev/optc/data"
	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/ort"
	"github.com/optc-dev/optc/passes"
	"github.com/optc-dev/optc/tools/synth"
)

// mnistConfig is the bundled demo build (testdata/mnist/optc.yaml), for
// the ORT target only: the TensorRT and Triton targets add scripts and a
// profile sweep that no floor corresponds to.
func (s *suite) mnistConfig(out string) (config.Config, error) {
	c, err := config.Load(filepath.Join(s.opts.Root, "testdata", "mnist", "optc.yaml"))
	if err != nil {
		return c, err
	}
	abs := func(p string) string { return filepath.Join(s.opts.Root, p) }
	c.Model, c.Calibration.Data, c.Eval.Data, c.Eval.Labels = abs(c.Model), abs(c.Calibration.Data), abs(c.Eval.Data), abs(c.Eval.Labels)
	c.Output, c.Force, c.Targets, c.INT8 = out, true, []string{"ort"}, true
	return c, nil
}

// buildVsFloor times `optc build --int8` of the bundled MNIST CNN against
// the least any INT8 build must do: create an ORT session and run the
// calibration samples through it once (reading them included).
func (s *suite) buildVsFloor() error {
	c, err := s.mnistConfig(filepath.Join(s.opts.Work, "build"))
	if err != nil {
		return err
	}
	var builds, quants, floors []float64
	for range s.opts.Repeats {
		start := time.Now()
		r, err := build.Run(context.Background(), build.Options{Config: c})
		if err != nil {
			return err
		}
		builds = append(builds, time.Since(start).Seconds())
		for _, st := range r.Stages {
			if st.Name == "quantize" {
				quants = append(quants, st.Seconds)
			}
		}
		f, err := floor(c)
		if err != nil {
			return err
		}
		floors = append(floors, f)
		s.progress("build %.2f s, floor %.3f s", builds[len(builds)-1], f)
	}
	total := ratioRow("toolchain", "optc build --int8 (MNIST, target ort) / floor", "floor: session + calibration inferences", "optc build --int8", "s", floors, builds)
	total.Note = "the build also checks every artifact on the eval set and times it in ORT (latency windows of the config)"
	s.res.Ratios = append(s.res.Ratios, total,
		ratioRow("toolchain", "quantize stage / floor", "floor: session + calibration inferences", "quantize stage", "s", floors, quants))
	return nil
}

// floor creates a session on c.Model and runs c's calibration data through
// it once, batch by batch, as a build's calibration must at least do.
func floor(c config.Config) (float64, error) {
	start := time.Now()
	m, err := graph.LoadFile(c.Model)
	if err != nil {
		return 0, err
	}
	defer m.Close()
	ins, outs := ort.Interface(m)
	level, _ := ort.ParseLevel(c.Runtime.Level)
	sess, err := ort.NewSession(ort.Source{Path: c.Model, Inputs: ins, Outputs: outs}, ort.Options{Level: level, IntraOpThreads: c.Runtime.Threads})
	if err != nil {
		return 0, err
	}
	defer sess.Close()
	src, err := data.Open(c.Calibration.Data, data.GraphInputs(m.Graph), data.Options{Batch: c.Calibration.Batch,
		Samples: c.Calibration.Samples, Seed: c.Calibration.Seed, High: 1, Image: data.ConfigImage(c.Image)})
	if err != nil {
		return 0, err
	}
	defer src.Close()
	for {
		b, err := src.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return 0, err
		}
		if _, err := sess.Run(b.Tensors); err != nil {
			return 0, err
		}
	}
	return time.Since(start).Seconds(), nil
}

// passScaling runs the -O2 pipeline on 10k- and 100k-node Relu chains (a
// quarter of the nodes dead), alternating the two sizes. Linear passes give
// a time ratio of 10 (scaling exponent 1); a pass that rescans the graph
// per node gives 100 (exponent 2).
func (s *suite) passScaling() error {
	pipeline, err := passes.Select(2, nil, nil)
	if err != nil {
		return err
	}
	timeOn := func(n int) (float64, error) {
		m, err := synth.ReluChain(n, 4)
		if err != nil {
			return 0, err
		}
		start := time.Now()
		if _, err := passes.Run(m, pipeline, passes.Options{}); err != nil {
			return 0, fmt.Errorf("%d-node chain: %w", n, err)
		}
		return time.Since(start).Seconds(), nil
	}
	// One untimed round first: the first pipeline run of a process pays
	// for heap growth that later runs reuse.
	if _, err := timeOn(10_000); err != nil {
		return err
	}
	var small, large []float64
	for range s.opts.Repeats {
		a, err := timeOn(10_000)
		if err != nil {
			return err
		}
		b, err := timeOn(100_000)
		if err != nil {
			return err
		}
		small, large = append(small, a), append(large, b)
	}
	r := ratioRow("toolchain", "pass pipeline -O2, 100k-node / 10k-node graph", "10k nodes", "100k nodes", "s", small, large)
	r.Note = fmt.Sprintf("scaling exponent %.2f (1 = linear), %.1f µs/node at 100k", math.Log10(r.Ratio.Median), r.BMedian/100_000*1e6)
	s.res.Ratios = append(s.res.Ratios, r)
	return nil
}
