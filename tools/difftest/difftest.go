// Package difftest checks in ONNX Runtime that a transformed model still
// computes what the original did: the differential test every pass needs.
package difftest

import (
	"errors"
	"fmt"
	"io"
	"math"
	"testing"

	"github.com/optc-dev/optc/data"
	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/ort"
	"github.com/optc-dev/optc/tools/ortenv"
)

// Options set the data and tolerances; the zero value feeds 4 random
// samples in [0,1) and checks |a-b| <= 1e-5 + 1e-4|a| elementwise.
type Options struct {
	Data       string // a data spec for data.Open; "" is random
	DataOpts   data.Options
	Atol, Rtol float64
	Level      ort.Level // ORT optimization level for both (default disable)
}

// Check runs before and after (serialized, as bytes) on the same inputs
// and fails t when an output differs beyond tolerance, naming it.
func Check(t testing.TB, before, after []byte, opts Options) {
	t.Helper()
	ortenv.Require(t)
	if err := Compare(before, after, opts); err != nil {
		t.Fatal(err)
	}
}

// Compare is Check returning the difference as an error.
func Compare(before, after []byte, opts Options) error {
	if opts.Atol == 0 && opts.Rtol == 0 {
		opts.Atol, opts.Rtol = 1e-5, 1e-4
	}
	if opts.Data == "" {
		opts.Data = "random"
		if opts.DataOpts.Samples == 0 {
			opts.DataOpts.Samples = 4
		}
		if opts.DataOpts.High == 0 {
			opts.DataOpts.High = 1
		}
	}
	mb, err := graph.Parse(before, "")
	if err != nil {
		return fmt.Errorf("original: %w", err)
	}
	ma, err := graph.Parse(after, "")
	if err != nil {
		return fmt.Errorf("transformed: %w", err)
	}
	if err := ma.Verify(); err != nil {
		return fmt.Errorf("transformed model fails Verify: %w", err)
	}
	sb, err := session(mb, before, opts.Level)
	if err != nil {
		return fmt.Errorf("original: %w", err)
	}
	defer sb.Close()
	sa, err := session(ma, after, opts.Level)
	if err != nil {
		return fmt.Errorf("transformed: %w", err)
	}
	defer sa.Close()
	if len(sa.Outputs) != len(sb.Outputs) {
		return fmt.Errorf("%d outputs became %d", len(sb.Outputs), len(sa.Outputs))
	}
	src, err := data.Open(opts.Data, data.GraphInputs(mb.Graph), opts.DataOpts)
	if err != nil {
		return err
	}
	defer src.Close()
	for batch := 0; ; batch++ {
		b, err := src.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		want, err := sb.Run(b.Tensors)
		if err != nil {
			return fmt.Errorf("original: %w", err)
		}
		got, err := sa.Run(b.Tensors)
		if err != nil {
			return fmt.Errorf("transformed: %w", err)
		}
		for i := range want {
			if err := close(want[i], got[i], opts.Atol, opts.Rtol); err != nil {
				return fmt.Errorf("batch %d, output %q: %w", batch, sb.Outputs[i].Name, err)
			}
		}
	}
}

func session(m *graph.Model, b []byte, level ort.Level) (*ort.Session, error) {
	ins, outs := ort.Interface(m)
	opts := ort.DefaultOptions()
	opts.Level = level
	return ort.NewSession(ort.Source{Bytes: b, Inputs: ins, Outputs: outs}, opts)
}

func close(want, got *graph.Tensor, atol, rtol float64) error {
	if want.DType != got.DType || fmt.Sprint(want.Dims) != fmt.Sprint(got.Dims) {
		return fmt.Errorf("%s%v became %s%v", want.DType, want.Dims, got.DType, got.Dims)
	}
	w, err := want.Float32s()
	if err != nil {
		return err
	}
	g, err := got.Float32s()
	if err != nil {
		return err
	}
	for i := range w {
		a, b := float64(w[i]), float64(g[i])
		if math.IsNaN(a) && math.IsNaN(b) {
			continue
		}
		if !(math.Abs(a-b) <= atol+rtol*math.Abs(a)) {
			return fmt.Errorf("element %d is %g, was %g (atol %g, rtol %g)", i, b, a, atol, rtol)
		}
	}
	return nil
}
