// Package detect scores an object detector whose graph ends in its own
// post-processing (score threshold, NMS, top-k), as torchvision's and
// most exported detectors do: its outputs are the boxes it keeps
// [K,4] (x0, y0, x1, y1), their scores [K] and, optionally, their
// classes [K], for one image a run; or [B,K,4], [B,K] and [B,K] for a
// batch, padded with boxes whose score falls under the threshold. K
// depends on the data, so the models compared keep different numbers of
// boxes and an elementwise comparison cannot say anything.
//
// Per sample, the boxes scoring at least ScoreThresh are the model's
// detections; they are matched one to one to the ground truth of the
// same class (any class when the labels or the model have none) at
// IoU >= 0.5, greedily by IoU. Summed over the samples: precision,
// recall and their harmonic mean (the headline). Beside them mAP@0.5,
// over all the boxes the model keeps ranked by score, PASCAL VOC's
// all-point interpolated AP averaged over the classes the ground truth
// holds.
//
// Without ground truth (no labels given, as when the comparison picks
// this task by itself for a detector's outputs), A's detections are the
// ground truth: A scores 100 by definition and B's figures say how far
// it agrees with A's detections. When A keeps boxes but none reaches
// ScoreThresh (random inputs to a trained detector), both are judged at
// the median of A's scores instead, and the metric's name says so: two
// models that find nothing do not agree vacuously.
package detect

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/optc-dev/optc/task"
)

// Name is the task's name (config eval.task, --eval-task).
const Name = "detection"

// DefaultScoreThresh is the score a box needs to count as a detection: a
// common deployment threshold (torchvision's examples draw boxes from
// 0.5, many deployments from 0.5 up).
const DefaultScoreThresh = 0.5

// Options are the task's parameters.
type Options struct {
	// ScoreThresh: a box that scores less is not a detection (0.5).
	ScoreThresh float64
	// Boxes, Scores and Classes name the outputs; "" picks them by name
	// and shape.
	Boxes, Scores, Classes string
}

// ParamNames are the parameters ParseOptions reads (task.Spec.Params).
var ParamNames = []string{"score_thresh", "boxes", "scores", "classes"}

// ParseOptions reads Options from task parameters; a parameter not given
// keeps its default.
func ParseOptions(params map[string]string) (Options, error) {
	o := Options{ScoreThresh: DefaultScoreThresh}
	for _, name := range slices.Sorted(maps.Keys(params)) {
		v := params[name]
		switch name {
		case "score_thresh":
			x, err := strconv.ParseFloat(v, 64)
			if err != nil || x < 0 || x != x {
				return o, fmt.Errorf("task %s: score_thresh %q: want a number >= 0", Name, v)
			}
			o.ScoreThresh = x
		case "boxes":
			o.Boxes = v
		case "scores":
			o.Scores = v
		case "classes":
			o.Classes = v
		default:
			return o, fmt.Errorf("task %s has no parameter %q (it reads %s)", Name, name, strings.Join(ParamNames, ", "))
		}
	}
	return o, nil
}

// Object is a ground-truth box and its class (-1: any).
type Object struct {
	Box   task.Box
	Class int64
}

// New makes a Scorer of a detector's outputs against the objects of
// spec.Labels (a JSON file: see readLabels), or against A's detections
// when spec.Labels is "". opts come from ParseOptions.
func New(spec task.Spec, opts Options) (task.Scorer, error) {
	if opts.Boxes == "" {
		opts.Boxes = spec.Output // --eval-output names the boxes
	}
	s := &scorer{spec: spec, opts: opts}
	if spec.Labels != "" {
		labels, err := readLabels(spec.Labels)
		if err != nil {
			return nil, err
		}
		s.labels = labels
	}
	return s, nil
}

// readLabels reads the ground truth: a JSON array with one element per
// sample, each an array of objects {"box": [x0, y0, x1, y1], "label": k}
// ("label" left out: any class), in the coordinates of the model's
// boxes.
func readLabels(path string) ([][]Object, error) {
	b, err := task.ReadLabelFile(path)
	if err != nil {
		return nil, err
	}
	var raw [][]struct {
		Box   []float64 `json:"box"`
		Label *int64    `json:"label"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf(`%s: want a JSON array with one list of objects per sample, each {"box": [x0, y0, x1, y1], "label": k}: %w`, path, err)
	}
	out := make([][]Object, len(raw))
	for i, objs := range raw {
		out[i] = make([]Object, len(objs))
		for j, o := range objs {
			if len(o.Box) != 4 {
				return nil, fmt.Errorf("%s: sample %d, object %d: box has %d numbers, want [x0, y0, x1, y1]", path, i, j, len(o.Box))
			}
			bx := task.Box{X0: o.Box[0], Y0: o.Box[1], X1: o.Box[2], Y1: o.Box[3]}
			if bx.X1 < bx.X0 || bx.Y1 < bx.Y0 {
				return nil, fmt.Errorf("%s: sample %d, object %d: %v ends before it starts (want [x0, y0, x1, y1])", path, i, j, o.Box)
			}
			class := int64(-1)
			if o.Label != nil {
				if class = *o.Label; class < 0 {
					return nil, fmt.Errorf("%s: sample %d, object %d: label %d is not a class id", path, i, j, class)
				}
			}
			out[i][j] = Object{Box: bx, Class: class}
		}
	}
	return out, nil
}

// detection is a box a model kept, with the sample it is in.
type detection struct {
	sample int64
	box    task.Box
	score  float64
	class  int64
}

// scorer sums both models' matches over the samples added.
type scorer struct {
	spec   task.Spec
	opts   Options
	labels [][]Object // nil: A's detections are the ground truth

	names   []string // boxes, scores and, if any, classes
	classed bool     // the model gives classes

	samples int64
	truth   [][]Object     // each scored sample's ground truth (labels given)
	all     [2][]detection // every box each model kept, in sample order
}

// judged is what Result scores: each sample's ground truth and the
// boxes counted as detections.
type judged struct {
	thresh  float64
	gt      []Object // every sample's, in order
	gtStart []int    // gt[gtStart[i]:gtStart[i+1]] is sample i's
	a, b    task.Counts
}

// judge scores both models at score threshold t: against the labels, or
// against A's detections at t.
func (s *scorer) judge(t float64) judged {
	j := judged{thresh: t}
	kept := [2][][]detection{make([][]detection, s.samples), make([][]detection, s.samples)}
	for side := range 2 {
		for _, d := range s.all[side] {
			if d.score >= t {
				kept[side][d.sample] = append(kept[side][d.sample], d)
			}
		}
	}
	for i := range s.samples {
		var gt []Object
		if s.labels != nil {
			gt = s.truth[i]
		} else {
			for _, d := range kept[0][i] {
				gt = append(gt, Object{Box: d.box, Class: d.class})
			}
		}
		j.gtStart = append(j.gtStart, len(j.gt))
		j.gt = append(j.gt, gt...)
		for side, c := range []*task.Counts{&j.a, &j.b} {
			c.Found += int64(len(kept[side][i]))
			c.Matched += int64(matchByClass(kept[side][i], gt))
		}
	}
	return j
}

// pickAll finds the boxes, scores and classes among outs.
func pickAll(outs []task.Output, o Options) (names []string, err error) {
	find := func(named, what string, fits func(task.Output) bool, hints ...string) (string, error) {
		if named != "" {
			return task.PickNamed(Name, named, outs, fits, what)
		}
		var cands []string
		for _, x := range outs {
			if fits(x) && !slices.Contains(names, x.Name) {
				cands = append(cands, x.Name)
			}
		}
		if len(cands) > 1 {
			var hinted []string
			for _, c := range cands {
				if hasAny(c, hints...) {
					hinted = append(hinted, c)
				}
			}
			cands = hinted
		}
		switch len(cands) {
		case 0:
			return "", nil
		case 1:
			return cands[0], nil
		}
		return "", fmt.Errorf("task %s: outputs %s are all %s: name one (--eval-param %s=NAME)", Name, strings.Join(cands, ", "), what, strings.Fields(what)[0])
	}
	boxes, err := find(o.Boxes, "boxes (a float output [K,4] or [B,K,4])", func(x task.Output) bool {
		r := len(x.Shape)
		return x.Float && (r == 2 || r == 3) && x.Shape[r-1] == 4
	}, "box")
	if err != nil || boxes == "" {
		if err == nil {
			err = fmt.Errorf("task %s needs boxes (a float output [K,4] or [B,K,4]), and the model has none", Name)
		}
		return nil, err
	}
	names = []string{boxes}
	rank := len(outputNamed(outs, boxes).Shape) - 1
	scores, err := find(o.Scores, "scores (a float output with one value a box)", func(x task.Output) bool {
		return x.Float && len(x.Shape) == rank
	}, "score", "conf", "prob")
	if err != nil || scores == "" {
		if err == nil {
			err = fmt.Errorf("task %s: boxes %q, but no scores (a float output with one value a box)", Name, boxes)
		}
		return nil, err
	}
	names = append(names, scores)
	classes, err := find(o.Classes, "classes (an output with one class id a box)", func(x task.Output) bool {
		return len(x.Shape) == rank && (!x.Float || o.Classes != "" || hasAny(x.Name, "label", "class"))
	}, "label", "class")
	if err != nil {
		return nil, err
	}
	if classes != "" {
		names = append(names, classes)
	}
	return names, nil
}

func hasAny(name string, parts ...string) bool {
	n := strings.ToLower(name)
	return slices.ContainsFunc(parts, func(p string) bool { return strings.Contains(n, p) })
}

func outputNamed(outs []task.Output, name string) task.Output {
	i := slices.IndexFunc(outs, func(o task.Output) bool { return o.Name == name })
	return outs[i]
}

// Looks says whether outs look like a detector's post-processed outputs:
// boxes and scores whose count of boxes the model leaves open (it
// depends on the data). The comparison then scores them by this task,
// against A's detections, when no other task is given.
func Looks(outs []task.Output) bool {
	names, err := pickAll(outs, Options{})
	if err != nil {
		return false
	}
	shape := outputNamed(outs, names[0]).Shape
	return shape[len(shape)-2] <= 0
}

// Labelled says whether the scorer reads labels (else A's detections are
// the truth, and the samples may come in any order).
func (s *scorer) Labelled() bool { return s.labels != nil }

func (s *scorer) Pick(outs []task.Output) (string, error) {
	names, err := s.PickAll(outs)
	if err != nil {
		return "", err
	}
	return names[0], nil
}

func (s *scorer) PickAll(outs []task.Output) ([]string, error) {
	names, err := pickAll(outs, s.opts)
	if err != nil {
		return nil, err
	}
	s.names, s.classed = names, len(names) == 3
	return names, nil
}

func (s *scorer) Add(int64, []float32, []float32, []int64) error {
	return fmt.Errorf("task %s reads several outputs together (internal: Add called)", Name)
}

func (s *scorer) AddAll(first int64, n int, a, b []task.Value) error {
	if len(a) != len(s.names) || len(b) != len(s.names) {
		return fmt.Errorf("task %s: %d and %d outputs given, want %d (internal)", Name, len(a), len(b), len(s.names))
	}
	if s.labels != nil && (first < 0 || first+int64(n) > int64(len(s.labels))) {
		return fmt.Errorf("%s: %d labels, fewer than the samples (a batch of %d from sample %d)", s.spec.Labels, len(s.labels), n, first)
	}
	da, err := s.split(a, n, "A")
	if err != nil {
		return err
	}
	db, err := s.split(b, n, "B")
	if err != nil {
		return err
	}
	for i := range n {
		if s.labels != nil {
			s.truth = append(s.truth, s.labels[first+int64(i)])
		}
		for side, dets := range [][]detection{da[i], db[i]} {
			for _, d := range dets {
				d.sample = s.samples + int64(i)
				s.all[side] = append(s.all[side], d)
			}
		}
	}
	s.samples += int64(n)
	return nil
}

// split reads one model's boxes, scores and classes of a batch of n
// samples into each sample's detections.
func (s *scorer) split(vals []task.Value, n int, model string) ([][]detection, error) {
	boxes, scores := vals[0], vals[1]
	out := make([][]detection, n)
	r := len(boxes.Dims)
	batched := r == 3
	if r != 2 && r != 3 || boxes.Dims[r-1] != 4 {
		return nil, fmt.Errorf("task %s: %s's boxes %q are %v, want [K,4] or [B,K,4]", Name, model, s.names[0], boxes.Dims)
	}
	if !batched && n != 1 {
		return nil, fmt.Errorf("task %s: boxes %q have no batch dim ([K,4]: one image a run), and a run held %d samples: give the data with batch 1", Name, s.names[0], n)
	}
	if batched && boxes.Dims[0] != int64(n) {
		return nil, fmt.Errorf("task %s: %s's boxes %q are %v for a batch of %d", Name, model, s.names[0], boxes.Dims, n)
	}
	k := boxes.Dims[r-2]
	want := slices.Clone(boxes.Dims[:r-1])
	for j, v := range vals[1:] {
		if !slices.Equal(v.Dims, want) {
			return nil, fmt.Errorf("task %s: %s's %q is %v beside boxes %v: want %v", Name, model, s.names[j+1], v.Dims, boxes.Dims, want)
		}
	}
	for i := range n {
		for j := range k {
			at := int64(i)*k + j
			bx := boxes.Data[4*at : 4*at+4]
			d := detection{box: task.Box{X0: float64(bx[0]), Y0: float64(bx[1]), X1: float64(bx[2]), Y1: float64(bx[3])},
				score: float64(scores.Data[at]), class: -1}
			if s.classed {
				d.class = int64(vals[2].Data[at])
			}
			if d.score != d.score {
				continue // a NaN score ranks nowhere; the comparison counts NaNs itself
			}
			out[i] = append(out[i], d)
		}
	}
	return out, nil
}

// sameClass says whether a detection of class d may match an object of
// class g (-1 on either side: any).
func sameClass(d, g int64) bool { return d < 0 || g < 0 || d == g }

// matchByClass is task.Match within each class: how many of the
// detections pair one to one with gt.
func matchByClass(dets []detection, gt []Object) int {
	classes := map[int64]bool{}
	anyClass := false
	for _, d := range dets {
		classes[d.class] = true
		anyClass = anyClass || d.class < 0
	}
	for _, g := range gt {
		classes[g.Class] = true
		anyClass = anyClass || g.Class < 0
	}
	boxesOf := func(c int64) (found, want []task.Box) {
		for _, d := range dets {
			if anyClass || d.class == c {
				found = append(found, d.box)
			}
		}
		for _, g := range gt {
			if anyClass || g.Class == c {
				want = append(want, g.Box)
			}
		}
		return found, want
	}
	if anyClass {
		f, g := boxesOf(-1)
		return task.Match(f, g)
	}
	n := 0
	for _, c := range slices.Sorted(maps.Keys(classes)) {
		f, g := boxesOf(c)
		n += task.Match(f, g)
	}
	return n
}

func (s *scorer) Result(samples int64, limited bool) (*task.Figure, error) {
	if s.labels != nil {
		if err := task.CheckCount(s.spec.Labels, len(s.labels), samples, limited); err != nil {
			return nil, err
		}
	}
	if s.samples == 0 {
		return nil, fmt.Errorf("task %s: no samples scored", Name)
	}
	j := s.judge(s.opts.ScoreThresh)
	metric := "hmean"
	if s.labels == nil {
		metric = "hmean against A's detections"
		if j.a.Found == 0 && len(s.all[0]) > 0 {
			// A kept boxes but none reached the threshold (random inputs to
			// a trained detector, an untrained one): judged just below the
			// median of A's scores instead of vacuously agreeing on nothing.
			j = s.judge(belowMedianScore(s.all[0]))
			metric = fmt.Sprintf("hmean against A's detections at score >= %.3g (A had none at %g)", j.thresh, s.opts.ScoreThresh)
		}
	}
	gt := int64(len(j.gt))
	pa, ra, ha := j.a.Figures(gt)
	pb, rb, hb := j.b.Figures(gt)
	if s.labels == nil && gt == 0 {
		// A kept no box at all: B agrees as far as it also kept none.
		pa, ra, ha = 100, 100, 100
		pb, rb, hb = 0, 0, 0
		if len(s.all[1]) == 0 {
			pb, rb, hb = 100, 100, 100
			metric = "hmean against A's detections (neither model kept a box on this data: nothing was judged)"
		}
	}
	others := []task.Metric{
		{Name: "precision", A: pa, B: pb},
		{Name: "recall", A: ra, B: rb},
	}
	if gt > 0 {
		others = append(others, task.Metric{Name: "mAP@0.5", A: j.meanAP(s.all[0], s.classed), B: j.meanAP(s.all[1], s.classed)})
	}
	others = append(others, task.Metric{Name: fmt.Sprintf("detections at score >= %.3g (count)", j.thresh), A: float64(j.a.Found), B: float64(j.b.Found)})
	f := task.NewFigure(Name, s.names[0], s.samples, metric, ha, hb, others...)
	f.Outputs = s.names
	return f, nil
}

// belowMedianScore is a threshold that keeps the upper half of dets'
// scores (from the median, the lower middle one, up) with no score on
// it: midway between the median and the next lower score, or half the
// lowest. A threshold on one of A's own scores would count that box in
// or out of B's detections by float noise alone (B's score 1e-6 below),
// which with few boxes is a drop of tens of points for a model that
// computes the same.
func belowMedianScore(dets []detection) float64 {
	scores := make([]float64, len(dets))
	for i, d := range dets {
		scores[i] = d.score
	}
	slices.Sort(scores)
	m := (len(scores) - 1) / 2
	for i := m - 1; i >= 0; i-- {
		if scores[i] < scores[m] {
			return (scores[i] + scores[m]) / 2
		}
	}
	return scores[m] / 2
}

// meanAP is the mean over the ground truth's classes of PASCAL VOC's
// all-point interpolated AP at IoU 0.5, in percent, over dets ranked by
// score.
func (j *judged) meanAP(dets []detection, classed bool) float64 {
	classes := map[int64]bool{}
	for _, g := range j.gt {
		classes[g.Class] = true
	}
	anyClass := classes[-1] || !classed
	if anyClass {
		classes = map[int64]bool{-1: true}
	}
	sum := 0.0
	for _, c := range slices.Sorted(maps.Keys(classes)) {
		sum += j.ap(dets, c, anyClass)
	}
	return 100 * sum / float64(len(classes))
}

// ap is one class's average precision (every class when anyClass).
func (j *judged) ap(dets []detection, class int64, anyClass bool) float64 {
	var ranked []detection
	for _, d := range dets {
		if anyClass || d.class == class {
			ranked = append(ranked, d)
		}
	}
	// By score, highest first; ties in the order the boxes came.
	slices.SortStableFunc(ranked, func(x, y detection) int { return cmp.Compare(y.score, x.score) })
	total := 0
	used := make([]bool, len(j.gt))
	for _, g := range j.gt {
		if anyClass || g.Class == class {
			total++
		}
	}
	if total == 0 {
		return 0
	}
	var prec, rec []float64
	tp := 0
	for i, d := range ranked {
		lo, hi := j.gtStart[d.sample], len(j.gt)
		if d.sample+1 < int64(len(j.gtStart)) {
			hi = j.gtStart[d.sample+1]
		}
		best, at := 0.0, -1
		for k := lo; k < hi; k++ {
			g := j.gt[k]
			if !anyClass && g.Class != class {
				continue
			}
			if iou := task.IoU(d.box, g.Box); iou > best {
				best, at = iou, k
			}
		}
		if at >= 0 && best >= task.MatchIoU && !used[at] {
			used[at] = true
			tp++
		}
		prec = append(prec, float64(tp)/float64(i+1))
		rec = append(rec, float64(tp)/float64(total))
	}
	// All-point interpolation: precision made monotone from the right,
	// summed over the steps of recall.
	for i := len(prec) - 2; i >= 0; i-- {
		prec[i] = max(prec[i], prec[i+1])
	}
	area, last := 0.0, 0.0
	for i := range prec {
		area += (rec[i] - last) * prec[i]
		last = rec[i]
	}
	return area
}
