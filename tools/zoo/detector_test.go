package zoo

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/optc-dev/optc/tools/ortenv"
	"github.com/optc-dev/optc/tools/testenv"
)

// The zoo's detector (NMS in its graph: a number of boxes that depends on
// the image, none on an empty one) through the CLI as its user runs it:
// quantize and build judge it by detections matched to its ground truth,
// and with no labels by agreement with the float model's detections.
func TestDetectorTask(t *testing.T) {
	if os.Getenv("ZOO") == "off" {
		t.Skip("ZOO=off")
	}
	dir := filepath.Dir(testenv.Data(t, "zoo/detector/static.onnx"))
	ortenv.Require(t)
	optc := optcBinary(t)
	work := t.TempDir()
	run := func(args ...string) (string, string) {
		t.Helper()
		var stdout, stderr bytes.Buffer
		cmd := exec.Command(optc, args...)
		cmd.Dir, cmd.Stdout, cmd.Stderr = dir, &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("optc %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
		}
		return stdout.String(), stderr.String()
	}
	// --allow-accuracy-loss: INT8's drop depends on the CPU's kernels (a
	// box or two of 74 is a point); what this test checks is that the
	// figures are there and sound, which a refusal would not write.
	labelled := []string{"--calib-data", "calib.npy", "--eval-data", "eval.npy", "--eval-task", "detection", "--eval-labels", "eval_labels.json", "--allow-accuracy-loss"}

	out, _ := run(append([]string{"quantize", "static.onnx", "-o", filepath.Join(work, "q.onnx")}, labelled...)...)
	// The float detector finds the scenes' rectangles (its training data's
	// kind): a low figure means the scoring is wrong, not the model.
	m := regexp.MustCompile(`(?m)^hmean\s+([\d.]+)%\s+([\d.]+)%`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no hmean row in:\n%s", out)
	}
	if f, _ := strconv.ParseFloat(m[1], 64); f < 90 {
		t.Errorf("float hmean %.2f%% against the ground truth, want >= 90:\n%s", f, out)
	}
	for _, want := range []string{"mAP@0.5", "detection hmean:"} {
		if !strings.Contains(out, want) {
			t.Errorf("quantize's output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "shape of boxes differs") || strings.Contains(out, "top-1 agreement") {
		t.Errorf("boxes judged elementwise or as a classifier:\n%s", out)
	}

	// No labels: the comparison picks the task itself.
	out, _ = run("quantize", "static.onnx", "-o", filepath.Join(work, "q2.onnx"), "--calib-data", "calib.npy", "--eval-data", "eval.npy", "--allow-accuracy-loss")
	if !strings.Contains(out, "hmean against A's detections") {
		t.Errorf("no agreement figure without labels:\n%s", out)
	}

	// build: the guard and report.json carry the task figure.
	bdir := filepath.Join(work, "build")
	run(append([]string{"build", "static.onnx", "--int8", "--target", "ort,tensorrt", "-o", bdir}, labelled...)...)
	raw, err := os.ReadFile(filepath.Join(bdir, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Models []struct {
			Name     string
			Accuracy *struct {
				TaskMetric string  `json:"task_metric"`
				Task       float64 `json:"task_accuracy"`
			}
		}
	}
	if err := json.Unmarshal(raw, &rep); err != nil {
		t.Fatal(err)
	}
	judged := 0
	for _, m := range rep.Models {
		if m.Accuracy != nil && m.Accuracy.TaskMetric == "detection hmean" {
			judged++
			if m.Accuracy.Task < 90 {
				t.Errorf("%s: detection hmean %.2f", m.Name, m.Accuracy.Task)
			}
		}
	}
	if judged < 3 {
		t.Errorf("report.json: %d models with a detection figure, want the input, FP32 and INT8 artifacts:\n%s", judged, raw)
	}
}
