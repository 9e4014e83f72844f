package ptq

import (
	"testing"
	"time"

	"github.com/optc-dev/optc/data"
	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/ort"
	"github.com/optc-dev/optc/quantize"
	"github.com/optc-dev/optc/tools/convstack"
	"github.com/optc-dev/optc/tools/ortenv"
)

// GPTQ under a deadline (the accuracy control's share of a budget) stops
// between groups of layers and counts what it left to nearest rounding;
// without one it rounds every layer.
func TestGPTQDeadline(t *testing.T) {
	ortenv.Require(t)
	m, err := convstack.Model(4, 8)
	if err != nil {
		t.Fatal(err)
	}
	ranges := map[string][2]float64{}
	for _, v := range m.Graph.Values() {
		if v.Const == nil {
			ranges[v.Name] = [2]float64{-4, 4}
		}
	}
	float, err := graph.MarshalReferencing(m)
	if err != nil {
		t.Fatal(err)
	}
	opts := Options{CalibData: "random", CalibOpts: data.Options{High: 1, Samples: 4, Seed: 1},
		Quant: quantize.Options{Target: quantize.TargetORT}, Session: ort.DefaultOptions()}
	opts.Calib.Session = ort.DefaultOptions()
	all, rep, err := gptqRounding(opts, float, ranges, 0, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Layers == 0 || len(all) != rep.Layers || rep.OutOfTime != 0 {
		t.Fatalf("no deadline: %+v, %d rounded", rep, len(all))
	}
	none, late, err := gptqRounding(opts, float, ranges, 0, time.Now().Add(-time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if len(none) != 0 || late.Layers != 0 || late.OutOfTime != rep.Layers {
		t.Errorf("a deadline passed before it began: %+v, %d rounded; want all %d left to nearest", late, len(none), rep.Layers)
	}
}
