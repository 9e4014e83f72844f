// Package segment scores a semantic segmentation model: each pixel's
// class is the argmax of the output's class scores [N,C,H,W] (the first
// of equal scores; a NaN is the maximum, as in numpy), counted against the labelled class in a confusion
// matrix per model over all samples. The headline is mIoU: the mean,
// over the classes that occur in the labels or in the model's
// predictions, of TP/(TP+FP+FN); beside it pixel accuracy and the IoU of
// the first 20 classes that occur in the labels.
//
// The labels are a .npy of integer class ids [N,H,W] or [N,1,H,W], at
// the output's resolution (nothing is resized). Ignore (255) marks a
// pixel that is not scored, as in Cityscapes, ADE20K and PaddleSeg's
// ignore_index, even where the model has more than 255 classes.
//
// PaddleSeg averages over all C classes, counting a class that occurs
// neither in the labels nor in the predictions as IoU 0; this package,
// like mmsegmentation's nanmean, leaves such a class out.
package segment

import (
	"fmt"
	"math"

	"github.com/optc-dev/optc/data"
	"github.com/optc-dev/optc/task"
)

// Name is the task's name (config eval.task, --eval-task).
const Name = "segmentation"

// Ignore is the label of a pixel that is not scored.
const Ignore = 255

// maxClassFigures bounds the per-class IoUs reported.
const maxClassFigures = 20

// New makes a Scorer of a segmentation output against the class ids of
// spec.Labels (.npy).
func New(spec task.Spec) (task.Scorer, error) {
	if spec.Labels == "" {
		return nil, fmt.Errorf("task %s needs labels: a .npy of class ids [N,H,W]", Name)
	}
	lt, err := data.ReadNpy(spec.Labels)
	if err != nil {
		return nil, err
	}
	dims := lt.Dims
	switch {
	case len(dims) == 3:
	case len(dims) == 4 && dims[1] == 1:
		dims = []int64{dims[0], dims[2], dims[3]}
	default:
		return nil, fmt.Errorf("%s: labels are %v, want class ids [N,H,W] or [N,1,H,W]", spec.Labels, lt.Dims)
	}
	ids, err := lt.Int64s()
	if err != nil {
		return nil, fmt.Errorf("%s: labels must be integer class ids: %w", spec.Labels, err)
	}
	// Held as int32, a quarter of what Int64s gives, for the whole run.
	labels := make([]int32, len(ids))
	for i, v := range ids {
		if v < 0 || v > math.MaxInt32 {
			h, w := int(dims[1]), int(dims[2])
			return nil, fmt.Errorf("%s: sample %d, pixel (%d, %d): label %d is not a class id", spec.Labels, i/(h*w), i%(h*w)/w, i%w, v)
		}
		labels[i] = int32(v)
	}
	return &scorer{spec: spec, labels: labels, n: dims[0], h: dims[1], w: dims[2]}, nil
}

type scorer struct {
	spec    task.Spec
	output  string
	labels  []int32 // n samples of h×w
	n, h, w int64

	c       int64   // classes, from the first batch
	a, b    []int64 // confusion matrices: [label*c+predicted]
	samples int64
}

func (s *scorer) Pick(outs []task.Output) (string, error) {
	fits := func(o task.Output) bool {
		return o.Float && len(o.Shape) == 4 && (o.Shape[1] >= 2 || o.Shape[1] <= 0)
	}
	name, err := task.PickOne(Name, s.spec.Output, outs, fits, "class scores (a float output [N,C,H,W], C >= 2)")
	s.output = name
	return name, err
}

func (s *scorer) Add(first int64, a, b []float32, dims []int64) error {
	if len(dims) != 4 || dims[1] < 2 {
		return fmt.Errorf("task %s: output %q is %v, not class scores [N,C,H,W] with C >= 2", Name, s.output, dims)
	}
	n, c, h, w := dims[0], dims[1], dims[2], dims[3]
	if n < 0 || h < 0 || w < 0 || int64(len(a)) != n*c*h*w || len(b) != len(a) {
		return fmt.Errorf("task %s: output %q: %d and %d values for dims %v", Name, s.output, len(a), len(b), dims)
	}
	if h != s.h || w != s.w {
		return fmt.Errorf("%s: labels are %dx%d, output %q is %dx%d (H×W): the labels must be at the output's resolution", s.spec.Labels, s.h, s.w, s.output, h, w)
	}
	if s.c == 0 {
		s.c = c
		s.a = make([]int64, c*c)
		s.b = make([]int64, c*c)
	} else if c != s.c {
		return fmt.Errorf("task %s: output %q has %d classes, %d in an earlier batch", Name, s.output, c, s.c)
	}
	if first < 0 || first+n > s.n {
		return fmt.Errorf("%s: %d labels, fewer than the samples (a batch of %d from sample %d)", s.spec.Labels, s.n, n, first)
	}
	size := h * w
	for i := range n {
		lab := s.labels[(first+i)*size : (first+i+1)*size]
		for p, l := range lab {
			if l != Ignore && int64(l) >= c {
				return fmt.Errorf("%s: sample %d, pixel (%d, %d): label %d, and output %q has %d classes", s.spec.Labels, first+i, int64(p)/w, int64(p)%w, l, s.output, c)
			}
		}
		accumulate(s.a, a[i*c*size:(i+1)*c*size], lab, c, size)
		accumulate(s.b, b[i*c*size:(i+1)*c*size], lab, c, size)
	}
	s.samples += n
	return nil
}

// accumulate counts one sample's pixels, scores [c][size], into conf.
func accumulate(conf []int64, scores []float32, lab []int32, c, size int64) {
	for p, l := range lab {
		if l == Ignore {
			continue
		}
		// The first maximum; a NaN is one, as in numpy and torch.
		best, arg := scores[p], int64(0)
		for k := int64(1); k < c && best == best; k++ {
			if v := scores[k*size+int64(p)]; v > best || v != v {
				best, arg = v, k
			}
		}
		conf[int64(l)*c+arg]++
	}
}

func (s *scorer) Result(samples int64, limited bool) (*task.Figure, error) {
	if err := task.CheckCount(s.spec.Labels, int(s.n), samples, limited); err != nil {
		return nil, err
	}
	if s.samples == 0 {
		return nil, fmt.Errorf("task %s: no samples scored", Name)
	}
	fa, fb := figures(s.a, s.c), figures(s.b, s.c)
	if fa.pixels == 0 {
		return nil, fmt.Errorf("%s: every pixel of the %d samples scored is %d (ignore)", s.spec.Labels, s.samples, Ignore)
	}
	others := []task.Metric{{Name: "pixel accuracy", A: fa.accuracy, B: fb.accuracy}}
	for k := range s.c {
		if len(others)-1 == maxClassFigures {
			break
		}
		if fa.labelled[k] {
			others = append(others, task.Metric{Name: fmt.Sprintf("IoU class %d", k), A: fa.iou[k], B: fb.iou[k]})
		}
	}
	return task.NewFigure(Name, s.output, s.samples, "mIoU", fa.miou, fb.miou, others...), nil
}

// figure is one model's scores, in percent.
type figure struct {
	miou, accuracy float64
	iou            []float64 // per class; 0 where the class does not occur
	labelled       []bool    // the class occurs in the labels
	pixels         int64     // pixels scored
}

func figures(conf []int64, c int64) figure {
	f := figure{iou: make([]float64, c), labelled: make([]bool, c)}
	row := make([]int64, c) // labelled as the class
	col := make([]int64, c) // predicted as the class
	var correct int64
	for l := range c {
		for p := range c {
			v := conf[l*c+p]
			row[l] += v
			col[p] += v
			f.pixels += v
		}
		correct += conf[l*c+l]
	}
	classes := 0
	for k := range c {
		tp := conf[k*c+k]
		union := row[k] + col[k] - tp
		f.labelled[k] = row[k] > 0
		if union > 0 {
			f.iou[k] = 100 * float64(tp) / float64(union)
			f.miou += f.iou[k]
			classes++
		}
	}
	if classes > 0 {
		f.miou /= float64(classes)
	}
	if f.pixels > 0 {
		f.accuracy = 100 * float64(correct) / float64(f.pixels)
	}
	return f
}
