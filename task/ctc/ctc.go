// Package ctc scores a text recognizer trained with CTC (PaddleOCR's rec
// models, CRNN-style heads): each sample's [T, classes] output is decoded
// greedily (the most likely class at every step, repeats collapsed, the
// blank dropped) into a string through a character dictionary, and the
// strings are scored against label strings as PaddleOCR's RecMetric does:
// sequence accuracy (the fraction of lines read exactly) and character
// accuracy (1 - the edit distance over the longer string's length,
// averaged over lines), spaces ignored.
package ctc

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strings"

	"github.com/optc-dev/optc/task"
)

// Name is the task's name (eval.task, --eval-task).
const Name = "ctc"

// Metric names.
const (
	MetricSequence  = "sequence accuracy"
	MetricCharacter = "character accuracy"
	MetricAgreement = "lines read as A reads them"
)

type scorer struct {
	spec   task.Spec
	dict   []string // the dictionary's characters; class k+1 is dict[k]
	labels []string
	output string
	space  int // the class that is a space (PaddleOCR's use_space_char), or -1

	lines                 int64
	exactA, exactB, agree int64
	charA, charB          float64
	checkedClasses        bool
	classes               int
}

// New reads spec.Dict (one character a line, as PaddleOCR's dictionaries
// are) and spec.Labels (one label string a line, one line a sample).
func New(spec task.Spec) (task.Scorer, error) {
	if spec.Dict == "" {
		return nil, fmt.Errorf("task ctc needs a character dictionary (eval.dict, --eval-dict): one character a line, as the model was trained with")
	}
	if spec.Labels == "" {
		return nil, fmt.Errorf("task ctc needs label strings (eval.labels, --eval-labels): a text file, one line a sample")
	}
	dict, err := readLines(spec.Dict)
	if err != nil {
		return nil, err
	}
	if len(dict) == 0 {
		return nil, fmt.Errorf("%s: the dictionary is empty", spec.Dict)
	}
	labels, err := readLines(spec.Labels)
	if err != nil {
		return nil, err
	}
	return &scorer{spec: spec, dict: dict, labels: labels, space: -1}, nil
}

// readLines reads a UTF-8 text file's lines without their line ends (a
// last line without one counts).
func readLines(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	b = bytes.TrimSuffix(b, []byte("\n"))
	if len(b) == 0 {
		return nil, nil
	}
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		lines = append(lines, strings.TrimSuffix(sc.Text(), "\r"))
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return lines, nil
}

func (s *scorer) Pick(outs []task.Output) (string, error) {
	var err error
	s.output, err = task.PickOne(Name, s.spec.Output, outs, func(o task.Output) bool {
		return o.Float && len(o.Shape) == 3
	}, "per-step class scores: a float output [batch, steps, classes]")
	return s.output, err
}

// checkClasses ties the output's class count to the dictionary: blank,
// the dictionary, and optionally a space after it.
func (s *scorer) checkClasses(c int) error {
	if s.checkedClasses {
		if c != s.classes {
			return fmt.Errorf("output %q: %d classes, earlier batches had %d", s.output, c, s.classes)
		}
		return nil
	}
	switch c {
	case len(s.dict) + 1:
	case len(s.dict) + 2:
		s.space = len(s.dict) + 1
	default:
		return fmt.Errorf("%s: %d characters, but output %q has %d classes (want the blank, the characters and perhaps a space: %d or %d); is this the model's dictionary?",
			s.spec.Dict, len(s.dict), s.output, c, len(s.dict)+1, len(s.dict)+2)
	}
	s.checkedClasses, s.classes = true, c
	return nil
}

func (s *scorer) Add(first int64, a, b []float32, dims []int64) error {
	if len(dims) != 3 {
		return fmt.Errorf("output %q: shape %v, want [batch, steps, classes]", s.output, dims)
	}
	n, t, c := int(dims[0]), int(dims[1]), int(dims[2])
	if err := s.checkClasses(c); err != nil {
		return err
	}
	for i := range n {
		k := first + int64(i)
		if k >= int64(len(s.labels)) {
			return fmt.Errorf("%s: %d labels for more samples than that", s.spec.Labels, len(s.labels))
		}
		want := noSpaces(s.labels[k])
		ra := noSpaces(s.decode(a[i*t*c:(i+1)*t*c], t, c))
		rb := noSpaces(s.decode(b[i*t*c:(i+1)*t*c], t, c))
		s.lines++
		if ra == want {
			s.exactA++
		}
		if rb == want {
			s.exactB++
		}
		if ra == rb {
			s.agree++
		}
		s.charA += CharAccuracy(ra, want)
		s.charB += CharAccuracy(rb, want)
	}
	return nil
}

// decode is greedy CTC decoding of one sample's [t, c] scores.
func (s *scorer) decode(x []float32, t, c int) string {
	var sb strings.Builder
	prev := -1
	for step := range t {
		row := x[step*c : (step+1)*c]
		best := 0
		for j, v := range row {
			if v > row[best] {
				best = j
			}
		}
		if best != prev && best != 0 {
			if best == s.space {
				sb.WriteByte(' ')
			} else {
				sb.WriteString(s.dict[best-1])
			}
		}
		prev = best
	}
	return sb.String()
}

func noSpaces(s string) string { return strings.ReplaceAll(s, " ", "") }

// CharAccuracy is 1 - the edit distance of got and want over the longer
// one's length in characters (1 when both are empty).
func CharAccuracy(got, want string) float64 {
	g, w := []rune(got), []rune(want)
	n := max(len(g), len(w))
	if n == 0 {
		return 1
	}
	return 1 - float64(editDistance(g, w))/float64(n)
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b []rune) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

func (s *scorer) Result(samples int64, limited bool) (*task.Figure, error) {
	if err := task.CheckCount(s.spec.Labels, len(s.labels), samples, limited); err != nil {
		return nil, err
	}
	if s.lines == 0 {
		return nil, fmt.Errorf("task ctc: no line was scored")
	}
	n := float64(s.lines)
	pct := func(v float64) float64 { return 100 * v / n }
	return task.NewFigure(Name, s.output, s.lines, MetricSequence, pct(float64(s.exactA)), pct(float64(s.exactB)),
		task.Metric{Name: MetricCharacter, A: pct(s.charA), B: pct(s.charB)},
		task.Metric{Name: MetricAgreement, A: 100, B: pct(float64(s.agree))}), nil
}
