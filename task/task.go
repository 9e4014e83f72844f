// Package task is what a task metric plug-in implements: a Scorer reads
// one output of the two models a comparison runs (A the reference, B the
// model judged), batch by batch, decodes it as its task does (greedy CTC,
// a text detector's boxes, a segmentation mask) and scores both against
// the ground truth (label strings, boxes, masks). The comparison reports
// the Figure beside its per-output statistics, and the accuracy guard
// judges the output by the Figure's drop instead of by its cosine.
//
// The plug-ins live in packages of their own (task/ctc, task/textdet,
// task/segment); task/tasks is the one list of them.
package task

import (
	"errors"
	"fmt"
	"os"
	"slices"
)

// Spec is what the user gives for a task (config eval.*, --eval-*).
type Spec struct {
	Name string
	// Labels is the ground-truth file, in the task's own format, one
	// entry per sample of the evaluation data, in its order.
	Labels string
	// Dict is a character dictionary, one character a line (ctc).
	Dict string
	// Output names the output to score; "" lets the task pick it.
	Output string
	// Params are the plug-in's own settings by name (eval.params,
	// --eval-param name=value): text-detection's thresholds, for one.
	Params map[string]string
}

// Output is one output the models share, for a Scorer to pick from.
type Output struct {
	Name  string
	Shape []int64 // as declared; -1 or 0 for a dim the model leaves open
	Float bool
}

// Scorer scores one output of two models against ground truth.
type Scorer interface {
	// Pick chooses the output to score among those the models share.
	Pick(outs []Output) (string, error)
	// Add scores one batch of the picked output: A's and B's values with
	// their dims (batch first); first is the index of the batch's first
	// sample in the evaluation data.
	Add(first int64, a, b []float32, dims []int64) error
	// Result is the figures over the samples added. samples is how many
	// the data gave; limited says the data was cut short on purpose (a
	// sample limit), so the ground truth may hold more.
	Result(samples int64, limited bool) (*Figure, error)
}

// Value is one output's values for one batch, with its dims (batch
// first where the output has a batch dim).
type Value struct {
	Data []float32
	Dims []int64
}

// Multi is a Scorer that reads several outputs together, whose dims may
// differ between A and B: a detector's boxes, scores and classes after
// NMS, where the models keep different numbers of boxes. The comparison
// calls PickAll and AddAll instead of Pick and Add, and judges those
// outputs by the task's figure alone (Figure.Outputs), not by their
// shapes or elementwise errors.
type Multi interface {
	Scorer
	// PickAll chooses the outputs to score, in the order AddAll gets
	// their values.
	PickAll(outs []Output) ([]string, error)
	// AddAll scores one batch of samples (n of them, from sample first):
	// A's and B's values of the picked outputs.
	AddAll(first int64, n int, a, b []Value) error
}

// Optional is a Scorer whose ground truth may be absent (it then scores B
// against A): Labelled says whether it reads labels, which samples drawn
// in a shuffled order cannot follow. A Scorer without it always reads
// labels.
type Optional interface {
	Labelled() bool
}

// ReadsLabels says whether s scores against labels in the data's order.
func ReadsLabels(s Scorer) bool {
	if o, ok := s.(Optional); ok {
		return o.Labelled()
	}
	return true
}

// Factory makes a fresh Scorer for one comparison.
type Factory func() (Scorer, error)

// Figure is a task's score of A and B. The headline metric is in percent
// (sequence accuracy, hmean, mIoU); DropPoints is A's minus B's.
type Figure struct {
	Task       string   `json:"task"`
	Output     string   `json:"output"`
	Samples    int64    `json:"samples"`
	Metric     string   `json:"metric"`
	A          float64  `json:"a"`
	B          float64  `json:"b"`
	DropPoints float64  `json:"drop_points"`
	Others     []Metric `json:"others,omitempty"`
	// Outputs are every output the figure judges, when a Multi scorer
	// read more than Output.
	Outputs []string `json:"outputs,omitempty"`
}

// Judges says whether the figure stands for output name's verdict.
func (f *Figure) Judges(name string) bool {
	return name == f.Output || slices.Contains(f.Outputs, name)
}

// Text is the figure in one line: the headline of A and B and the drop,
// then the other figures.
func (f *Figure) Text() string {
	drop := f.DropPoints
	if drop == 0 {
		drop = 0 // no "-0.00"
	}
	s := fmt.Sprintf("%s %s on %d samples (%s): A %.2f%%, B %.2f%%, drop %.2f points", f.Task, f.Metric, f.Samples, f.Output, f.A, f.B, drop)
	for _, o := range f.Others {
		s += fmt.Sprintf("; %s A %.2f, B %.2f", o.Name, o.A, o.B)
	}
	return s
}

// Other is the secondary figure of that name.
func (f *Figure) Other(name string) (Metric, bool) {
	for _, m := range f.Others {
		if m.Name == name {
			return m, true
		}
	}
	return Metric{}, false
}

// Metric is a secondary figure of a task (character accuracy, precision,
// recall, a class's IoU), in percent unless its name says otherwise.
type Metric struct {
	Name string  `json:"name"`
	A    float64 `json:"a"`
	B    float64 `json:"b"`
}

// NewFigure fills a Figure's headline and drop.
func NewFigure(task, output string, samples int64, metric string, a, b float64, others ...Metric) *Figure {
	return &Figure{Task: task, Output: output, Samples: samples, Metric: metric, A: a, B: b, DropPoints: a - b, Others: others}
}

// ReadLabelFile reads a ground-truth file whole, for a plug-in that
// parses it; the error names the file once ("read PATH: reason", without
// os.PathError's own copy of the path).
func ReadLabelFile(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return b, nil
}

// CheckCount says whether n ground-truth entries fit the samples scored:
// as many, or more when the data was cut short on purpose.
func CheckCount(path string, n int, samples int64, limited bool) error {
	if int64(n) < samples || int64(n) > samples && !limited {
		return fmt.Errorf("%s: %d labels for %d samples", path, n, samples)
	}
	return nil
}

// PickNamed is the output the user named, when the models share it and it
// fits; what describes what fits, for the error.
func PickNamed(task, named string, outs []Output, fits func(Output) bool, what string) (string, error) {
	for _, o := range outs {
		if o.Name == named {
			if !fits(o) {
				return "", fmt.Errorf("task %s: output %q is not %s", task, named, what)
			}
			return named, nil
		}
	}
	return "", fmt.Errorf("task %s: the models share no output %q", task, named)
}

// PickOne is the only output of outs that fits, or the one named; what
// describes what fits, for the error.
func PickOne(task, named string, outs []Output, fits func(Output) bool, what string) (string, error) {
	if named != "" {
		return PickNamed(task, named, outs, fits, what)
	}
	pick := ""
	for _, o := range outs {
		if fits(o) {
			if pick != "" {
				return "", fmt.Errorf("task %s: outputs %q and %q are both %s: name the one to score", task, pick, o.Name, what)
			}
			pick = o.Name
		}
	}
	if pick == "" {
		return "", fmt.Errorf("task %s needs %s, and the model has none", task, what)
	}
	return pick, nil
}
