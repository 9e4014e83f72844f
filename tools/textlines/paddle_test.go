package textlines

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/ort"
	"github.com/optc-dev/optc/tools/ortenv"
	"github.com/optc-dev/optc/tools/testenv"
	"github.com/optc-dev/optc/tools/testgraph"
)

// dictionary reads PaddleOCR's ppocr_keys_v1.txt from the cache: the rec
// model's classes 1..6623, one character a line.
func dictionary(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(testenv.Data(t, "ocr-models/ppocr_keys_v1.txt"))
	if err != nil {
		t.Fatal(err)
	}
	keys := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(keys) != 6623 {
		t.Fatalf("ppocr_keys_v1.txt has %d lines; want 6623", len(keys))
	}
	return keys
}

// runModel runs the model at path on x ([n, dims...] float32) and returns
// output 0.
func runModel(t *testing.T, path string, x []float32, dims []int64) ([]float32, []int64) {
	t.Helper()
	ortenv.Require(t)
	model, m := testgraph.ReadModel(t, path)
	ins, outs := ort.Interface(m)
	in, err := graph.NewTensor(ins[0].Name, graph.Float, dims, floatBytes(x))
	if err != nil {
		t.Fatal(err)
	}
	res := ortenv.Run(t, ort.Source{Bytes: model, Inputs: ins, Outputs: outs[:1]}, ort.DefaultOptions(), []*graph.Tensor{in})
	y, err := res[0].Float32s()
	if err != nil {
		t.Fatal(err)
	}
	return y, res[0].Dims
}

// TestPaddleRec reads the recognizer samples with the real PP-OCRv4 rec
// model and greedy CTC decoding: it must read nearly all labels, nearly
// always exactly. (Its misreadings are mostly dropped spaces between
// words, a known habit of the Chinese-trained model.)
func TestPaddleRec(t *testing.T) {
	keys := dictionary(t)
	path := filepath.Join(testenv.Data(t, "ocr-models"), "ch_PP-OCRv4_rec_infer.onnx")
	const n = 40
	s, err := GenerateRec(RecEvalSeed, n)
	if err != nil {
		t.Fatal(err)
	}
	y, dims := runModel(t, path, s.Images, []int64{n, Channels, Height, RecWidth})
	if len(dims) != 3 || dims[0] != n || dims[2] != int64(len(keys))+2 {
		t.Fatalf("rec output %v; want [%d, T, %d]", dims, n, len(keys)+2)
	}
	steps, classes := int(dims[1]), int(dims[2])
	exact, nospace := 0, 0
	for i := range n {
		var got strings.Builder
		prev := 0
		for k := range steps {
			p := y[(i*steps+k)*classes : (i*steps+k+1)*classes]
			best := 0
			for c := range p {
				if p[c] > p[best] {
					best = c
				}
			}
			if best != 0 && best != prev {
				if best == classes-1 {
					got.WriteByte(' ')
				} else {
					got.WriteString(keys[best-1])
				}
			}
			prev = best
		}
		if got.String() == s.Labels[i] {
			exact++
		} else {
			t.Logf("sample %d: read %q, label %q", i, got.String(), s.Labels[i])
		}
		if strings.ReplaceAll(got.String(), " ", "") == strings.ReplaceAll(s.Labels[i], " ", "") {
			nospace++
		}
	}
	t.Logf("PP-OCRv4 rec reads %d of %d labels exactly, %d but for spaces", exact, n, nospace)
	if exact < n*3/4 || nospace < n*9/10 {
		t.Fatalf("PP-OCRv4 rec reads %d of %d labels exactly, %d but for spaces; want >= 75%% and >= 90%%", exact, n, nospace)
	}
}

// TestPaddleDet runs the real PP-OCRv4 det model on detector pages: its
// text probability map (DB's shrunk text kernels, thresholded at 0.3 as
// PaddleOCR does) must cover a fifth or more of nearly every ground-truth
// box, in one region (a box the model splits into words would count as
// several detections), and lie, nearly all of it, inside the boxes.
func TestPaddleDet(t *testing.T) {
	path := filepath.Join(testenv.Data(t, "ocr-models"), "ch_PP-OCRv4_det_infer.onnx")
	const n, size = 20, DetSize
	s, err := GenerateDet(DetEvalSeed, n, size, size)
	if err != nil {
		t.Fatal(err)
	}
	y, dims := runModel(t, path, s.Images, []int64{n, Channels, size, size})
	if len(dims) != 4 || dims[0] != n || dims[1] != 1 || dims[2] != size || dims[3] != size {
		t.Fatalf("det output %v; want [%d, 1, %d, %d]", dims, n, size, size)
	}
	boxes, found, in, on, split := 0, 0, 0, 0, 0
	for i := range n {
		p := y[i*size*size : (i+1)*size*size]
		inside := make([]bool, size*size)
		for _, b := range s.Boxes[i] {
			hit, area := 0, 0
			for yy := int(b[1]); yy < int(b[3]); yy++ {
				for xx := int(b[0]); xx < int(b[2]); xx++ {
					inside[yy*size+xx] = true
					area++
					if p[yy*size+xx] > 0.3 {
						hit++
					}
				}
			}
			boxes++
			if hit*5 >= area {
				found++
			} else {
				t.Logf("page %d: box %v: %d of %d pixels above 0.3", i, b, hit, area)
			}
		}
		for j, c := range components(p, size, s.Boxes[i]) {
			if c > 1 {
				split++
				t.Logf("page %d: box %v: %d regions", i, s.Boxes[i][j], c)
			}
		}
		for k, v := range p {
			if v > 0.3 {
				on++
				if inside[k] {
					in++
				}
			}
		}
	}
	t.Logf("PP-OCRv4 det: %d of %d boxes found; %d of %d text pixels inside a box; %d boxes split", found, boxes, in, on, split)
	if found*100 < boxes*95 || in*100 < on*99 || split*100 > boxes*5 {
		t.Fatalf("PP-OCRv4 det finds %d of %d boxes (want >= 95%%), %d of %d text pixels inside a box (want >= 99%%), %d boxes split (want <= 5%%)",
			found, boxes, in, on, split)
	}
}

// components counts, per box, the regions (4-connected) of the pixels of
// p above 0.3 that start inside it.
func components(p []float32, size int, boxes []Box) []int {
	seen := make([]bool, len(p))
	count := make([]int, len(boxes))
	for k := range p {
		if seen[k] || p[k] <= 0.3 {
			continue
		}
		x, y := k%size, k/size
		for j, b := range boxes {
			if float32(x) >= b[0] && float32(x) < b[2] && float32(y) >= b[1] && float32(y) < b[3] {
				count[j]++
			}
		}
		stack := []int{k}
		seen[k] = true
		for len(stack) > 0 {
			q := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			qx, qy := q%size, q/size
			for _, d := range [][2]int{{1, 0}, {-1, 0}, {0, 1}, {0, -1}} {
				nx, ny := qx+d[0], qy+d[1]
				if nx < 0 || ny < 0 || nx >= size || ny >= size {
					continue
				}
				if m := ny*size + nx; !seen[m] && p[m] > 0.3 {
					seen[m] = true
					stack = append(stack, m)
				}
			}
		}
	}
	return count
}
