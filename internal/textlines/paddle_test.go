package textlines

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/internal/ortenv"
	"github.com/optc-dev/optc/internal/testenv"
	"github.com/optc-dev/optc/ort"
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
	model, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m, err := graph.Parse(model, "")
	if err != nil {
		t.Fatal(err)
	}
	ins, outs := ort.Interface(m)
	s, err := ort.NewSession(ort.Source{Bytes: model, Inputs: ins, Outputs: outs[:1]}, ort.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	in, err := graph.NewTensor(ins[0].Name, graph.Float, dims, floatBytes(x))
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Run([]*graph.Tensor{in})
	if err != nil {
		t.Fatal(err)
	}
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
