package task

import (
	"cmp"
	"slices"
)

// MatchIoU is the IoU at which a found box matches a ground-truth box
// (PASCAL VOC's and ICDAR's criterion; COCO's AP50).
const MatchIoU = 0.5

// Box is an axis-aligned box [x0, y0, x1, y1], in the pixels of whatever
// the model's boxes are in (the probability map's, the input image's).
type Box struct {
	X0, Y0, X1, Y1 float64
}

// Area is the box's area, 0 for a box that ends before it starts.
func (b Box) Area() float64 { return max(b.X1-b.X0, 0) * max(b.Y1-b.Y0, 0) }

// IoU is the boxes' intersection over their union (0 when the union is
// empty).
func IoU(a, b Box) float64 {
	inter := Box{max(a.X0, b.X0), max(a.Y0, b.Y0), min(a.X1, b.X1), min(a.Y1, b.Y1)}.Area()
	union := a.Area() + b.Area() - inter
	if union <= 0 {
		return 0
	}
	return inter / union
}

// Match pairs found boxes with ground-truth boxes one to one, greedily
// by IoU, highest first, among the pairs at IoU >= MatchIoU, and returns
// how many pairs it made.
func Match(found, gt []Box) int {
	type pair struct {
		iou  float64
		f, g int
	}
	var pairs []pair
	for i, f := range found {
		for j, g := range gt {
			if iou := IoU(f, g); iou >= MatchIoU {
				pairs = append(pairs, pair{iou, i, j})
			}
		}
	}
	slices.SortStableFunc(pairs, func(x, y pair) int { return cmp.Compare(y.iou, x.iou) })
	usedF := make([]bool, len(found))
	usedG := make([]bool, len(gt))
	n := 0
	for _, p := range pairs {
		if !usedF[p.f] && !usedG[p.g] {
			usedF[p.f], usedG[p.g] = true, true
			n++
		}
	}
	return n
}

// Counts are one model's found boxes and how many of them matched,
// summed over samples.
type Counts struct{ Matched, Found int64 }

// Figures are precision, recall and hmean in percent against gt
// ground-truth boxes; each is 0 where it would divide by 0.
func (c Counts) Figures(gt int64) (p, r, h float64) {
	if c.Found > 0 {
		p = float64(c.Matched) / float64(c.Found)
	}
	if gt > 0 {
		r = float64(c.Matched) / float64(gt)
	}
	if p+r > 0 {
		h = 2 * p * r / (p + r)
	}
	return 100 * p, 100 * r, 100 * h
}
