package compare

import (
	"fmt"
	"math"
	"slices"

	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/internal/jsonfloat"
	"github.com/optc-dev/optc/ort"
)

// Task says what the evaluation data measures beyond the per-output
// statistics every comparison has.
type Task string

// TaskLM: the model is a causal language model; the data are token ids
// and each position's logits predict the next id (LM). The other tasks
// are task/tasks' list: labels score a classifier-like output, and a
// plug-in's Scorer (Options.Scorer) reads ground truth of its own.
const TaskLM Task = "lm"

// LM is a causal language model's figures on held-out token ids: A is the
// reference, B the model compared with it. Every position but each
// window's last predicts the id after it.
type LM struct {
	Input  string `json:"input"`  // the token ids
	Output string `json:"output"` // the logits
	Tokens int64  `json:"tokens"` // predictions scored
	// PerplexityA and PerplexityB are exp(mean negative log-likelihood of
	// the next id).
	PerplexityA jsonfloat.Float `json:"perplexity_a"`
	PerplexityB jsonfloat.Float `json:"perplexity_b"`
	// IncreasePercent is B's perplexity over A's, in percent (+3: 3%
	// higher).
	IncreasePercent jsonfloat.Float `json:"perplexity_increase_percent"`
	// Agreement is the fraction of positions where B's most likely next
	// id is A's.
	Agreement float64 `json:"next_token_agreement"`
	// AccuracyA and AccuracyB are the fractions of positions whose most
	// likely next id is the actual one.
	AccuracyA float64 `json:"next_token_accuracy_a"`
	AccuracyB float64 `json:"next_token_accuracy_b"`
}

// LMIO picks a language model's token-id input (the only int64 input of
// rank 2, or the first of several) and logits output (named, else the
// only float output of rank 3) from a model's interface, as indexes.
func LMIO(ins, outs []ort.IO, logits string) (in, out int, err error) {
	in = slices.IndexFunc(ins, func(x ort.IO) bool { return x.DType == graph.Int64 && len(x.Shape) == 2 })
	if in < 0 {
		return 0, 0, fmt.Errorf("task lm needs token ids: an int64 input of shape [batch, seq], and the model has none")
	}
	if logits != "" {
		out = slices.IndexFunc(outs, func(x ort.IO) bool { return x.Name == logits })
		if out < 0 {
			return 0, 0, fmt.Errorf("task lm: the model has no output %q to read logits from", logits)
		}
		if o := outs[out]; !isFloat(o.DType) || o.Shape != nil && len(o.Shape) != 3 {
			return 0, 0, fmt.Errorf("task lm: output %q is %s of rank %d, not float logits [batch, seq, vocab]", logits, o.DType, len(o.Shape))
		}
		return in, out, nil
	}
	out = -1
	for i, o := range outs {
		if isFloat(o.DType) && len(o.Shape) == 3 {
			if out >= 0 {
				return 0, 0, fmt.Errorf("task lm: outputs %q and %q are both float of rank 3: name the logits (eval.logits, --eval-logits)", outs[out].Name, o.Name)
			}
			out = i
		}
	}
	if out < 0 {
		return 0, 0, fmt.Errorf("task lm needs logits: a float output of shape [batch, seq, vocab], and the model has none")
	}
	return in, out, nil
}

func isFloat(t graph.DataType) bool {
	return t == graph.Float || t == graph.Float16 || t == graph.Double || t == graph.BFloat16
}

// LMScorer accumulates a language model's figures batch by batch in
// constant memory.
type LMScorer struct {
	input, output     string
	nllA, nllB        float64
	agree, hitA, hitB int64
	tokens            int64
}

// NewLMScorer scores the logits output against the ids input.
func NewLMScorer(input, output string) *LMScorer {
	return &LMScorer{input: input, output: output}
}

// Add scores one batch: ids [N, T], logits of A and B [N, T, V].
func (s *LMScorer) Add(ids *graph.Tensor, a, b []float32, dims []int64) error {
	if len(dims) != 3 {
		return fmt.Errorf("output %q: logits of shape %v, want [batch, seq, vocab]", s.output, dims)
	}
	if len(ids.Dims) != 2 || ids.Dims[0] != dims[0] || ids.Dims[1] != dims[1] {
		return fmt.Errorf("input %q of shape %v does not match the logits %q of shape %v", s.input, ids.Dims, s.output, dims)
	}
	x, err := ids.Int64s()
	if err != nil {
		return fmt.Errorf("input %q: %w", s.input, err)
	}
	n, t, v := int(dims[0]), int(dims[1]), int(dims[2])
	for r := range n {
		for p := 0; p < t-1; p++ {
			next := x[r*t+p+1]
			if next < 0 || next >= int64(v) {
				return fmt.Errorf("input %q: token id %d outside the vocabulary of %d logits", s.input, next, v)
			}
			off := (r*t + p) * v
			la, lb := a[off:off+v], b[off:off+v]
			ba, nla := nextNLL(la, int(next))
			bb, nlb := nextNLL(lb, int(next))
			s.nllA += nla
			s.nllB += nlb
			if ba == bb {
				s.agree++
			}
			if ba == int(next) {
				s.hitA++
			}
			if bb == int(next) {
				s.hitB++
			}
			s.tokens++
		}
	}
	return nil
}

// nextNLL is the most likely id and the negative log-likelihood of id
// under the softmax of logits l.
func nextNLL(l []float32, id int) (int, float64) {
	best, mx := 0, l[0]
	for j, z := range l {
		if z > mx {
			best, mx = j, z
		}
	}
	var sum float64
	for _, z := range l {
		sum += math.Exp(float64(z - mx))
	}
	return best, math.Log(sum) - float64(l[id]-mx)
}

// Result is the figures over every batch added.
func (s *LMScorer) Result() (*LM, error) {
	if s.tokens == 0 {
		return nil, fmt.Errorf("task lm: no next token to predict (input %q needs windows of at least 2 ids)", s.input)
	}
	n := float64(s.tokens)
	pa, pb := math.Exp(s.nllA/n), math.Exp(s.nllB/n)
	return &LM{Input: s.input, Output: s.output, Tokens: s.tokens, PerplexityA: jsonfloat.Float(pa), PerplexityB: jsonfloat.Float(pb),
		IncreasePercent: jsonfloat.Float(100 * (pb/pa - 1)), Agreement: float64(s.agree) / n,
		AccuracyA: float64(s.hitA) / n, AccuracyB: float64(s.hitB) / n}, nil
}
