// Package tasks is the one list of task metrics (config eval.task,
// --eval-task, optc compare --task): the comparison's own classification
// and language-model scoring, and the plug-ins that score one output
// against ground truth in a format of their own.
package tasks

import (
	"fmt"
	"slices"
	"strings"

	"github.com/optc-dev/optc/internal/choice"
	"github.com/optc-dev/optc/task"
	"github.com/optc-dev/optc/task/ctc"
	"github.com/optc-dev/optc/task/detect"
	"github.com/optc-dev/optc/task/segment"
	"github.com/optc-dev/optc/task/textdet"
)

// The tasks the comparison scores itself (package compare).
const (
	// Default: labels (a .npy of class ids), when given, score the
	// classifier-like output by top-1 accuracy.
	Default = "default"
	// Classification is Default by its name.
	Classification = "classification"
	// LM: a causal language model on token ids: perplexity and
	// next-token agreement.
	LM = "lm"
)

// plugin is a task whose Scorer reads ground truth of its own.
type plugin struct {
	name  string
	about string // what the labels are, for help and errors
	dict  bool   // it takes a character dictionary
	// optionalLabels: it scores B against A when no labels are given.
	optionalLabels bool
	new            func(task.Spec) (task.Scorer, error)
	// params are the parameters it reads (task.Spec.Params), and check
	// parses them (nil: it reads none).
	params []string
	check  func(map[string]string) error
}

var plugins = []plugin{
	{name: ctc.Name, about: "label strings, one line a sample (.txt)", dict: true, new: ctc.New},
	{name: textdet.Name, about: "boxes [x0, y0, x1, y1] in the map's pixels, an array per sample (.json)",
		new:    newWithOptions(textdet.ParseOptions, textdet.New),
		params: textdet.ParamNames,
		check:  checkOptions(textdet.ParseOptions)},
	{name: segment.Name, about: "class ids [N, H, W], 255 ignored (.npy)", new: segment.New},
	{name: detect.Name, about: `objects per sample, [{"box": [x0, y0, x1, y1], "label": k}, ...] (.json); without labels, A's detections`,
		optionalLabels: true,
		new:            newWithOptions(detect.ParseOptions, detect.New),
		params:         detect.ParamNames,
		check:          checkOptions(detect.ParseOptions)},
}

// newWithOptions is the new of a plug-in whose New takes options parsed
// from the spec's parameters.
func newWithOptions[O any](parse func(map[string]string) (O, error), newScorer func(task.Spec, O) (task.Scorer, error)) func(task.Spec) (task.Scorer, error) {
	return func(s task.Spec) (task.Scorer, error) {
		o, err := parse(s.Params)
		if err != nil {
			return nil, err
		}
		return newScorer(s, o)
	}
}

// checkOptions is the check of such a plug-in: its parameters parse.
func checkOptions[O any](parse func(map[string]string) (O, error)) func(map[string]string) error {
	return func(p map[string]string) error {
		_, err := parse(p)
		return err
	}
}

// WithParams are the tasks that read parameters (eval.params).
func WithParams() []string {
	var out []string
	for _, p := range plugins {
		if p.params != nil {
			out = append(out, p.name)
		}
	}
	return out
}

// Params are the parameters task name reads.
func Params(name string) []string {
	if p := find(name); p != nil {
		return p.params
	}
	return nil
}

// Help is one line on each task and its labels, for --eval-task's help.
func Help() string {
	h := LM + ": a causal LM on token ids [N, T]: perplexity and next-token agreement"
	for _, p := range plugins {
		h += "; " + p.name + ": " + p.about
	}
	return h
}

// Names is every task's name, in the order help lists them.
func Names() []string {
	names := []string{Default, Classification, LM}
	for _, p := range plugins {
		names = append(names, p.name)
	}
	return names
}

// Plugins is the names of the tasks that score one output against
// ground truth of their own.
func Plugins() []string { return pluginNames(func(plugin) bool { return true }) }

// WithDict is the names of the tasks that read a character dictionary.
func WithDict() []string { return pluginNames(func(p plugin) bool { return p.dict }) }

func pluginNames(keep func(plugin) bool) []string {
	var names []string
	for _, p := range plugins {
		if keep(p) {
			names = append(names, p.name)
		}
	}
	return names
}

func find(name string) *plugin {
	for i := range plugins {
		if plugins[i].name == name {
			return &plugins[i]
		}
	}
	return nil
}

// IsPlugin says whether the task reads its own ground truth (eval.labels
// in its own format) through a task.Scorer.
func IsPlugin(name string) bool { return find(name) != nil }

// NeedsLabels says whether the task cannot score without ground truth.
func NeedsLabels(name string) bool {
	p := find(name)
	return p != nil && !p.optionalLabels
}

// TakesDict says whether the task reads a character dictionary.
func TakesDict(name string) bool {
	p := find(name)
	return p != nil && p.dict
}

// Labels says what eval.labels holds for the task.
func Labels(name string) string {
	if p := find(name); p != nil {
		return p.about
	}
	if name == LM {
		return "none (the data's next tokens)"
	}
	return "class ids, one a sample (.npy of integers)"
}

// Scoring splits the ground truth a comparison is given: the class labels
// it scores itself (compare.Options.Labels), or a plug-in's scorer
// (compare.Options.Scorer) that reads spec.Labels in its own format.
func Scoring(spec task.Spec) (labels string, scorer task.Factory) {
	if f := Factory(spec); f != nil {
		return "", f
	}
	return spec.Labels, nil
}

// Factory is how a comparison makes the task's scorer, or nil for the
// tasks the comparison scores itself.
func Factory(spec task.Spec) task.Factory {
	p := find(spec.Name)
	if p == nil {
		return nil
	}
	return func() (task.Scorer, error) { return p.new(spec) }
}

// Validate is the rules of an eval section's task fields, one line per
// problem, naming the config keys (FlagNames spells them as flags): config.Validate and the
// commands that take the flags without a config (optc quantize) apply the
// same rules.
func Validate(s task.Spec) []string {
	var bad []string
	if s.Name != "" && !slices.Contains(Names(), s.Name) {
		return []string{fmt.Sprintf("eval.task: %q (want %s)", s.Name, choice.Or(Names()))}
	}
	if NeedsLabels(s.Name) && s.Labels == "" {
		bad = append(bad, fmt.Sprintf("eval.task %s needs eval.labels: %s", s.Name, Labels(s.Name)))
	}
	if TakesDict(s.Name) && s.Dict == "" {
		bad = append(bad, fmt.Sprintf("eval.task %s needs eval.dict: the model's character dictionary, one character a line", s.Name))
	}
	if !TakesDict(s.Name) && s.Dict != "" {
		bad = append(bad, fmt.Sprintf("eval.dict needs eval.task %s", choice.Or(WithDict())))
	}
	if len(s.Params) > 0 {
		switch p := find(s.Name); {
		case p == nil || p.check == nil:
			bad = append(bad, fmt.Sprintf("eval.params needs eval.task %s", choice.Or(WithParams())))
		default:
			if err := p.check(s.Params); err != nil {
				bad = append(bad, "eval.params: "+err.Error())
			}
		}
	}
	if s.Output != "" && !IsPlugin(s.Name) {
		bad = append(bad, fmt.Sprintf("eval.output needs an eval.task that scores one output: %s", choice.Or(Plugins())))
	}
	return bad
}

// FlagNames spells the eval keys in msg as the flags that set them.
func FlagNames(msg string) string {
	return strings.NewReplacer("eval.task", "--eval-task", "eval.labels", "--eval-labels", "eval.dict", "--eval-dict", "eval.output", "--eval-output", "eval.params", "--eval-param").Replace(msg)
}
