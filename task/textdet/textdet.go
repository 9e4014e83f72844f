// Package textdet scores a DB-style text detector (PaddleOCR's det
// models): it decodes the probability map each model gives into boxes as
// PaddleOCR's DBPostProcess does, matches them to the ground-truth boxes
// one to one at IoU >= 0.5, and reports ICDAR-style hmean, precision and
// recall, summed over all samples.
//
// The decoding, per sample: binarize the map at Thresh (p > Thresh);
// take the connected components of the foreground (8-connectivity), in
// scan order (the component whose first pixel comes first, row by row),
// at most MaxCandidates of them; for each, its bounding rectangle in
// pixel-centre coordinates (a component over columns 10..20 spans x 10 to
// 20); drop it if its shorter side is under MinSize; score it by the mean
// probability inside the rectangle (PaddleOCR's "fast" score) and drop it
// under BoxThresh; unclip it by d = area*UnclipRatio/perimeter on every
// side; drop it if its shorter side is now under MinSize+2; clip it to
// the map and round its corners to whole pixels.
//
// What differs from PaddleOCR:
//   - boxes are axis-aligned rectangles, not cv2.minAreaRect's rotated
//     ones, and the unclip grows the rectangle by d on each side instead of
//     offsetting the polygon with round corners (pyclipper) and taking the
//     offset's minimum-area rectangle again: the same for upright text,
//     larger boxes for slanted text;
//   - the components are taken from the foreground pixels, not from
//     cv2.findContours (which also lists holes as contours);
//   - the labels are in the probability map's coordinates: nothing is
//     rescaled to the source image (PaddleOCR scales the boxes by the
//     image's size over the map's);
//   - no "###" (do-not-care) boxes: every ground-truth box counts.
package textdet

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/optc-dev/optc/task"
)

// Name is the task's name (config eval.task, --eval-task).
const Name = "text-detection"

// Options are DBPostProcess's parameters. A zero field takes its default
// (Defaults, PaddleOCR's published values); to keep every box whatever
// its score, give BoxThresh a tiny positive value.
type Options struct {
	Thresh        float64 // binarizes the probability map (0.3)
	BoxThresh     float64 // drops a box whose mean probability is lower (0.6)
	UnclipRatio   float64 // how far a box grows (1.5)
	MaxCandidates int     // components decoded at most, per sample (1000)
	MinSize       int     // drops a box with a shorter side (3)
}

// ParamNames are the parameters ParseOptions reads (task.Spec.Params),
// named as PaddleOCR's DBPostProcess names them.
var ParamNames = []string{"thresh", "box_thresh", "unclip_ratio", "max_candidates", "min_size"}

// ParseOptions reads Options from task parameters; a parameter not given
// keeps its default, and the values are checked.
func ParseOptions(params map[string]string) (Options, error) {
	o := Defaults()
	for _, name := range slices.Sorted(maps.Keys(params)) {
		v := params[name]
		var err error
		switch name {
		case "thresh":
			o.Thresh, err = strconv.ParseFloat(v, 64)
		case "box_thresh":
			o.BoxThresh, err = strconv.ParseFloat(v, 64)
		case "unclip_ratio":
			o.UnclipRatio, err = strconv.ParseFloat(v, 64)
		case "max_candidates":
			o.MaxCandidates, err = strconv.Atoi(v)
		case "min_size":
			o.MinSize, err = strconv.Atoi(v)
		default:
			return o, fmt.Errorf("task %s: unknown parameter %q (want %s)", Name, name, strings.Join(ParamNames, ", "))
		}
		if err != nil {
			return o, fmt.Errorf("task %s: parameter %s=%q: not a number", Name, name, v)
		}
		if (name == "max_candidates" || name == "min_size") && (o.MaxCandidates == 0 || o.MinSize == 0) {
			// 0 would mean the default: say so rather than surprise.
			return o, fmt.Errorf("task %s: parameter %s=0: give at least 1", Name, name)
		}
	}
	return o.withDefaults()
}

// Defaults are PaddleOCR's DBPostProcess defaults.
func Defaults() Options {
	return Options{Thresh: 0.3, BoxThresh: 0.6, UnclipRatio: 1.5, MaxCandidates: 1000, MinSize: 3}
}

// withDefaults fills the zero fields and checks the others.
func (o Options) withDefaults() (Options, error) {
	d := Defaults()
	if o.Thresh == 0 {
		o.Thresh = d.Thresh
	}
	if o.BoxThresh == 0 {
		o.BoxThresh = d.BoxThresh
	}
	if o.UnclipRatio == 0 {
		o.UnclipRatio = d.UnclipRatio
	}
	if o.MaxCandidates == 0 {
		o.MaxCandidates = d.MaxCandidates
	}
	if o.MinSize == 0 {
		o.MinSize = d.MinSize
	}
	switch {
	case !(o.Thresh > 0 && o.Thresh < 1):
		return o, fmt.Errorf("task %s: thresh %g is not in (0, 1)", Name, o.Thresh)
	case !(o.BoxThresh > 0 && o.BoxThresh <= 1):
		return o, fmt.Errorf("task %s: box thresh %g is not in (0, 1]", Name, o.BoxThresh)
	case !(o.UnclipRatio > 0) || math.IsInf(o.UnclipRatio, 0):
		return o, fmt.Errorf("task %s: unclip ratio %g is not positive", Name, o.UnclipRatio)
	case o.MaxCandidates < 0:
		return o, fmt.Errorf("task %s: max candidates %d is negative", Name, o.MaxCandidates)
	case o.MinSize < 0:
		return o, fmt.Errorf("task %s: min size %d is negative", Name, o.MinSize)
	}
	return o, nil
}

// New makes a Scorer of a text detector's probability map against the
// boxes of spec.Labels (a JSON file: see readLabels).
func New(spec task.Spec, opts Options) (task.Scorer, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if spec.Labels == "" {
		return nil, fmt.Errorf("task %s needs ground-truth boxes (a JSON file: per sample, a list of [x0, y0, x1, y1])", Name)
	}
	labels, err := readLabels(spec.Labels)
	if err != nil {
		return nil, err
	}
	return &scorer{spec: spec, opts: opts, labels: labels}, nil
}

// readLabels reads the ground truth: a JSON array with one element per
// sample, each an array of boxes, each [x0, y0, x1, y1] or a
// quadrilateral [x1, y1, x2, y2, x3, y3, x4, y4] (its bounding rectangle
// is taken).
func readLabels(path string) ([][]task.Box, error) {
	b, err := task.ReadLabelFile(path)
	if err != nil {
		return nil, err
	}
	var raw []json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("%s: want a JSON array with one list of boxes per sample: %w", path, err)
	}
	out := make([][]task.Box, len(raw))
	for i, r := range raw {
		var boxes [][]float64
		if err := json.Unmarshal(r, &boxes); err != nil {
			return nil, fmt.Errorf("%s: sample %d: want a list of boxes, each a list of numbers: %w", path, i, err)
		}
		out[i] = make([]task.Box, len(boxes))
		for j, v := range boxes {
			var bx task.Box
			switch len(v) {
			case 4:
				bx = task.Box{X0: v[0], Y0: v[1], X1: v[2], Y1: v[3]}
				if bx.X1 < bx.X0 || bx.Y1 < bx.Y0 {
					return nil, fmt.Errorf("%s: sample %d, box %d: %v ends before it starts (want [x0, y0, x1, y1])", path, i, j, v)
				}
			case 8:
				bx = task.Box{X0: math.Inf(1), Y0: math.Inf(1), X1: math.Inf(-1), Y1: math.Inf(-1)}
				for k := 0; k < 8; k += 2 {
					bx.X0, bx.X1 = min(bx.X0, v[k]), max(bx.X1, v[k])
					bx.Y0, bx.Y1 = min(bx.Y0, v[k+1]), max(bx.Y1, v[k+1])
				}
			default:
				return nil, fmt.Errorf("%s: sample %d, box %d: want 4 or 8 numbers, got %d", path, i, j, len(v))
			}
			out[i][j] = bx
		}
	}
	return out, nil
}

// scorer sums the matches of both models over the samples added.
type scorer struct {
	spec   task.Spec
	opts   Options
	labels [][]task.Box
	output string

	samples int64 // samples scored
	gt      int64 // ground-truth boxes of the samples scored
	a, b    task.Counts
}

func (s *scorer) Pick(outs []task.Output) (string, error) {
	fits := func(o task.Output) bool {
		return o.Float && (len(o.Shape) == 3 || len(o.Shape) == 4 && o.Shape[1] <= 1)
	}
	name, err := task.PickOne(Name, s.spec.Output, outs, fits, "a probability map (a float output [N,1,H,W] or [N,H,W])")
	s.output = name
	return name, err
}

func (s *scorer) Add(first int64, a, b []float32, dims []int64) error {
	var n, h, w int64
	switch {
	case len(dims) == 3:
		n, h, w = dims[0], dims[1], dims[2]
	case len(dims) == 4 && dims[1] == 1:
		n, h, w = dims[0], dims[2], dims[3]
	default:
		return fmt.Errorf("task %s: output %q is %v, not a probability map [N,1,H,W] or [N,H,W]", Name, s.output, dims)
	}
	size := h * w
	if n < 0 || h < 0 || w < 0 || int64(len(a)) != n*size || len(b) != len(a) {
		return fmt.Errorf("task %s: output %q: %d and %d values for dims %v", Name, s.output, len(a), len(b), dims)
	}
	if first < 0 || first+n > int64(len(s.labels)) {
		return fmt.Errorf("%s: %d labels, fewer than the samples (a batch of %d from sample %d)", s.spec.Labels, len(s.labels), n, first)
	}
	for i := range n {
		gt := s.labels[first+i]
		s.gt += int64(len(gt))
		for _, side := range []struct {
			vals []float32
			c    *task.Counts
		}{{a, &s.a}, {b, &s.b}} {
			found := Decode(side.vals[i*size:(i+1)*size], int(h), int(w), s.opts)
			side.c.Found += int64(len(found))
			side.c.Matched += int64(task.Match(found, gt))
		}
	}
	s.samples += n
	return nil
}

func (s *scorer) Result(samples int64, limited bool) (*task.Figure, error) {
	if err := task.CheckCount(s.spec.Labels, len(s.labels), samples, limited); err != nil {
		return nil, err
	}
	if s.samples == 0 {
		return nil, fmt.Errorf("task %s: no samples scored", Name)
	}
	pa, ra, ha := s.a.Figures(s.gt)
	pb, rb, hb := s.b.Figures(s.gt)
	return task.NewFigure(Name, s.output, s.samples, "hmean", ha, hb,
		task.Metric{Name: "precision", A: pa, B: pb},
		task.Metric{Name: "recall", A: ra, B: rb},
		task.Metric{Name: "boxes found (count)", A: float64(s.a.Found), B: float64(s.b.Found)},
	), nil
}

// Decode is DBPostProcess over one sample's probability map, h rows of w
// (see the package comment). opts' zero fields take their defaults; an
// invalid option decodes nothing.
func Decode(prob []float32, h, w int, opts Options) []task.Box {
	opts, err := opts.withDefaults()
	if err != nil || h <= 0 || w <= 0 || len(prob) != h*w {
		return nil
	}
	thresh := float32(opts.Thresh)
	// label: 0 background, -1 foreground not yet visited, 1 visited.
	label := make([]int8, len(prob))
	for i, p := range prob {
		if p > thresh {
			label[i] = -1
		}
	}
	var out []task.Box
	var stack []int
	candidates := 0
	for start := range label {
		if label[start] != -1 {
			continue
		}
		if candidates == opts.MaxCandidates {
			break
		}
		candidates++
		// Flood fill the component from start, with a stack.
		x0, y0 := start%w, start/w
		x1, y1 := x0, y0
		label[start] = 1
		stack = append(stack[:0], start)
		for len(stack) > 0 {
			p := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			px, py := p%w, p/w
			x0, x1, y0, y1 = min(x0, px), max(x1, px), min(y0, py), max(y1, py)
			for dy := -1; dy <= 1; dy++ {
				ny := py + dy
				if ny < 0 || ny >= h {
					continue
				}
				for dx := -1; dx <= 1; dx++ {
					nx := px + dx
					if nx < 0 || nx >= w {
						continue
					}
					if q := ny*w + nx; label[q] == -1 {
						label[q] = 1
						stack = append(stack, q)
					}
				}
			}
		}
		if b, ok := candidate(prob, w, h, x0, y0, x1, y1, opts); ok {
			out = append(out, b)
		}
	}
	return out
}

// candidate filters, scores and unclips the rectangle of a component
// over columns x0..x1 and rows y0..y1.
func candidate(prob []float32, w, h, x0, y0, x1, y1 int, opts Options) (task.Box, bool) {
	bw, bh := float64(x1-x0), float64(y1-y0)
	if min(bw, bh) < float64(opts.MinSize) {
		return task.Box{}, false
	}
	// The fast score: the mean probability over the rectangle's pixels.
	var sum float64
	for y := y0; y <= y1; y++ {
		for _, p := range prob[y*w+x0 : y*w+x1+1] {
			sum += float64(p)
		}
	}
	if sum/float64((x1-x0+1)*(y1-y0+1)) < opts.BoxThresh {
		return task.Box{}, false
	}
	d := 0.0
	if per := 2 * (bw + bh); per > 0 {
		d = bw * bh * opts.UnclipRatio / per
	}
	if min(bw, bh)+2*d < float64(opts.MinSize+2) {
		return task.Box{}, false
	}
	clip := func(v float64, hi int) float64 { return min(max(math.Round(v), 0), float64(hi)) }
	return task.Box{
		X0: clip(float64(x0)-d, w), Y0: clip(float64(y0)-d, h),
		X1: clip(float64(x1)+d, w), Y1: clip(float64(y1)+d, h),
	}, true
}
