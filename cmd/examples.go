package cmd

import (
	"strings"

	"github.com/spf13/cobra"
)

// example is one line of a command's Examples: section.
type example struct {
	command string // the command's path under optc: "quantize", "runtime install"
	what    string // the comment above the line
	line    string // the invocation, from "optc"
}

// examples are every command's help examples, in the order
// TestHelpExamples runs them: in one folder holding model.onnx (an image
// classifier), calib.npy, eval.npy and labels.npy, each line as written
// (a trailing "> FILE" writes stdout there). A later line may read what an
// earlier one wrote. Because they are run, none can go stale.
var examples = []example{
	{"inspect", "what a model takes and returns, its operators and storage", "optc inspect model.onnx"},
	{"optimize", "run the passes at -O2 and check the result against the input in ORT", "optc optimize model.onnx -o model.opt.onnx"},
	{"passes", "list the passes in pipeline order", "optc passes"},
	{"quantize", "static INT8 for ONNX Runtime, calibrated on one file, checked on another with labels", "optc quantize model.onnx -o model.int8.onnx --calib-data calib.npy --eval-data eval.npy --eval-labels labels.npy"},
	{"quantize", "dynamic INT8 (no calibration data): MatMul/Gemm weights only", "optc quantize model.onnx -o model.dynamic.onnx --dynamic"},
	{"quantize", "Q/DQ for TensorRT, with bias correction", "optc quantize model.onnx -o model.trt.onnx --target tensorrt --calib-data calib.npy --technique bias-correction"},
	{"lint", "what TensorRT would refuse or leave unfused", "optc lint model.trt.onnx --target tensorrt"},
	{"compare", "the optimized model against its input on random inputs, at the default tolerances", "optc compare model.onnx model.opt.onnx --data random"},
	{"compare", "INT8 against FP32: each one's accuracy on the labels, and the outputs within 1.0 at the 99th percentile", "optc compare model.onnx model.int8.onnx --data eval.npy --labels labels.npy --atol 1 --check p99"},
	{"run", "each output of the model on the data as .npy", "optc run model.onnx --data eval.npy -o outputs"},
	{"bench", "latency percentiles and throughput at batch 1 and 8 on random inputs", "optc bench model.int8.onnx --data random --batch 1,8 --duration 1s"},
	{"convert", "move the weights to a side file (model.external.onnx.data)", "optc convert model.onnx -o model.external.onnx --external-data"},
	{"build", "an FP32 build for ONNX Runtime: passes, checks on labelled data, latency, report", "optc build model.onnx -o base --target ort --eval-data eval.npy --eval-labels labels.npy"},
	{"build", "an INT8 build, accuracy-guarded on held-out labelled data, within a 2-minute budget", "optc build model.onnx -o out --int8 --calib-data calib.npy --eval-data eval.npy --eval-labels labels.npy --budget 2m"},
	{"build", "the same options as a config file to edit and pass with --config", "optc build model.onnx -o out2 --int8 --calib-data calib.npy --print-config > optc.yaml"},
	{"diff", "what changed between two builds, failing when accuracy drops by more than a point", "optc diff base out --max-accuracy-drop 1"},
	{"runtime install", "install the pinned ONNX Runtime library for this machine (once; cached)", "optc runtime install"},
	{"runtime list", "the cached libraries and whether they still match their checksums", "optc runtime list"},
	{"version", "optc's, Go's and the ONNX Runtime library's versions", "optc version"},
	{"completion", "a bash completion script (needs the bash-completion package)", "optc completion bash > optc.bash"},
}

// setExamples fills each command's Example field from examples.
func setExamples(root *cobra.Command) {
	by := map[string][]string{}
	for _, e := range examples {
		text := "  # " + e.what + "\n  " + e.line
		by[e.command] = append(by[e.command], text)
		// A command that only groups others (runtime) shows theirs.
		if i := strings.Index(e.command, " "); i > 0 {
			by[e.command[:i]] = append(by[e.command[:i]], text)
		}
	}
	var walk func(c *cobra.Command, path string)
	walk = func(c *cobra.Command, path string) {
		if lines, ok := by[path]; ok {
			c.Example = strings.Join(lines, "\n\n")
		}
		for _, sub := range c.Commands() {
			p := sub.Name()
			if path != "" {
				p = path + " " + p
			}
			walk(sub, p)
		}
	}
	walk(root, "")
}
