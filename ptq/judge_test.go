package ptq

import (
	"strings"
	"testing"

	"github.com/optc-dev/optc/compare"
	"github.com/optc-dev/optc/report/schema"
	"github.com/optc-dev/optc/task"
)

// TestJudgeTaskFigure: with a task plug-in's figure the guard judges its
// output by the figure's drop, not by its cosine, and the other outputs
// as always.
func TestJudgeTaskFigure(t *testing.T) {
	probs := &compare.OutputStats{Name: "probs", Total: 1000, Elements: 1000, SampleElements: 500, MinSampleCosine: 0.8, MaxSampleRelError: 0.6, SamplesCompared: 2}
	other := &compare.OutputStats{Name: "feat", Total: 1000, Elements: 1000, SampleElements: 500, MinSampleCosine: 0.999, MaxSampleRelError: 0.01, SamplesCompared: 2}
	r := &compare.Result{Outputs: []*compare.OutputStats{probs, other},
		Task: task.NewFigure("ctc", "probs", 2, "sequence accuracy", 98, 91)}
	cs := Judge(r, Limits{})
	var metrics []string
	for _, c := range cs {
		metrics = append(metrics, c.Metric+" "+c.Output)
		if c.Output == "probs" && c.Metric != schema.MetricTaskDrop {
			t.Errorf("the scored output is judged by %s too", c.Metric)
		}
	}
	if cs[0].Metric != schema.MetricTaskDrop || cs[0].Pass || cs[0].Measured != 7 || cs[0].Limit != GuardMaxDrop {
		t.Fatalf("checks %v: first %+v", metrics, cs[0])
	}
	if s := cs[0].String(); !strings.Contains(s, "task metric drop of probs 7.00 points, over the 1.00 allowed (ctc sequence accuracy: 98.00% float, 91.00% quantized") {
		t.Errorf("the check reads %q", s)
	}
	if !strings.Contains(strings.Join(metrics, ";"), schema.MetricCosine+" feat") {
		t.Errorf("the other output is not judged by cosine: %v", metrics)
	}
	// A drop within the limit given passes.
	if cs := Judge(r, Limits{MaxAccuracyDrop: 8}); !cs[0].Pass {
		t.Errorf("a 7-point drop under an 8-point limit: %+v", cs[0])
	}
}
