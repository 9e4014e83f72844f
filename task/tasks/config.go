package tasks

import (
	"cmp"

	"github.com/optc-dev/optc/config"
	"github.com/optc-dev/optc/task"
)

// The build config's task keys of eval (task, labels' format, dict,
// output, params, logits) are this list's: their rules live here, beside
// the plug-ins they name. eval's own keys (data, samples, batch) are
// config's.
func init() {
	config.Register(config.Owner{Name: "tasks", Section: "eval",
		Rules: func(c config.Config) []string { return Validate(Spec(c.Eval)) }, Joins: configJoins})
}

// Spec is the eval section as a task plug-in reads it.
func Spec(e config.Eval) task.Spec {
	return task.Spec{Name: e.Task, Labels: e.Labels, Dict: e.Dict, Output: e.Output, Params: e.Params}
}

// configJoins are the language-model task's rules on other sections.
func configJoins(c config.Config) []string {
	var bad []string
	lm := c.Eval.Task == LM
	if lm && c.Eval.Labels != "" {
		bad = append(bad, "eval.labels does not apply to eval.task lm (it scores the next token of eval.data)")
	}
	if ev := cmp.Or(c.Eval.Data, c.Calibration.Data); lm && (ev == "" || ev == "random") {
		bad = append(bad, "eval.task lm needs token ids: eval.data (--eval-data) or calibration.data, not random data")
	}
	if c.Eval.Logits != "" && !lm {
		bad = append(bad, "eval.logits needs eval.task lm")
	}
	if len(c.Latency.SeqLengths) > 0 && !lm {
		bad = append(bad, "latency.seq_lengths needs eval.task lm")
	}
	if c.Quantize.MaxPerplexityIncrease > 0 && !lm {
		bad = append(bad, "quantize.max_perplexity_increase needs eval.task lm")
	}
	return bad
}
