package cmd

import (
	"slices"
	"strings"
	"testing"

	"github.com/optc-dev/optc/config"
)

// TestCompletion: `optc completion`'s scripts ask optc (`__complete`) for a
// flag's values; every flag that takes one of a fixed set of names offers
// them, and only those.
func TestCompletion(t *testing.T) {
	cases := []struct {
		args []string
		want []string
	}{
		// The targets are the registry's (export/targets), then all.
		{[]string{"build", "m.onnx", "--target", ""}, config.TargetChoices()},
		{[]string{"build", "m.onnx", "--target", ""}, append([]string{"ort", "tensorrt", "triton"}, config.TargetChoices()[3:]...)},
		{[]string{"build", "--method", ""}, []string{"minmax", "percentile", "entropy", "mse", "auto"}},
		{[]string{"build", "--level", ""}, []string{"disable", "basic", "extended", "all"}},
		{[]string{"build", "--format", ""}, []string{"qdq", "qoperator"}},
		{[]string{"build", "--opt-level", ""}, []string{"0", "1", "2"}},
		{[]string{"build", "--reduce-range", ""}, []string{"auto", "on", "off"}},
		{[]string{"build", "--placement", ""}, []string{"auto", "all-int8"}},
		{[]string{"build", "--image-color", ""}, []string{"rgb", "bgr", "gray"}},
		{[]string{"quantize", "--target", ""}, []string{"ort", "tensorrt"}},
		{[]string{"quantize", "--method", ""}, []string{"minmax", "percentile", "entropy", "mse", "auto"}},
		{[]string{"quantize", "--format", ""}, []string{"qdq", "qoperator"}},
		{[]string{"quantize", "--weights", ""}, []string{"int4", "int3"}},
		{[]string{"quantize", "--weight-rounding", ""}, []string{"rtn", "gptq"}},
		{[]string{"quantize", "--block-size", ""}, []string{"32", "64", "128"}},
		{[]string{"quantize", "--image-layout", ""}, []string{"NCHW", "NHWC"}},
		{[]string{"quantize", "--technique", ""}, []string{"cle", "smoothquant", "gptq", "bias-correction"}},
		{[]string{"build", "--technique", ""}, []string{"cle", "smoothquant", "gptq", "bias-correction"}},
		{[]string{"run", "m.onnx", "--level", ""}, []string{"disable", "basic", "extended", "all"}},
		{[]string{"bench", "--provider", ""}, []string{"cpu", "cuda", "tensorrt"}},
		{[]string{"compare", "--check", ""}, []string{"max", "mean", "p99"}},
		{[]string{"optimize", "--opt-level", ""}, []string{"0", "1", "2"}},
		{[]string{"lint", "--target", ""}, []string{"tensorrt"}},
		{[]string{"diff", "--percentile", ""}, []string{"p50", "p90", "p99"}},
		{[]string{"build", "--eval-task", ""}, []string{"default", "classification", "lm", "ctc", "text-detection", "segmentation", "detection"}},
		{[]string{"compare", "--task", ""}, []string{"default", "classification", "lm", "ctc", "text-detection", "segmentation", "detection"}},
		{[]string{"build", "--nchwc", ""}, []string{"auto", "on", "off", "8", "16"}},
		{[]string{"optimize", "--prune-scope", ""}, []string{"layer", "global"}},
		{[]string{"runtime", "install", "--platform", ""}, []string{"darwin/arm64", "linux/amd64", "linux/arm64", "all"}},
		// After a comma in a list flag: the values not given yet.
		{[]string{"build", "--target", "ort,triton,"}, []string{"ort,triton,tensorrt", "ort,triton,openvino", "ort,triton,ort-mobile", "ort,triton,all"}},
		{[]string{"quantize", "--technique", "gptq,"}, []string{"gptq,cle", "gptq,smoothquant", "gptq,bias-correction"}},
		{[]string{"runtime", "install", "--platform", "linux/amd64,"}, []string{"linux/amd64,darwin/arm64", "linux/amd64,linux/arm64", "linux/amd64,all"}},
	}
	for _, c := range cases {
		status, out, errOut := run(t, append([]string{"__complete"}, c.args...)...)
		if status != 0 {
			t.Errorf("%v: status %d: %s", c.args, status, errOut)
			continue
		}
		var got []string
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			if !strings.HasPrefix(l, ":") { // the last line is the directive
				got = append(got, l)
			}
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%v: offers %q, want %q", c.args, got, c.want)
		}
	}
	// The completion command itself writes a script for each shell.
	for _, sh := range []string{"bash", "zsh", "fish", "powershell"} {
		status, out, errOut := run(t, "completion", sh)
		if status != 0 || !strings.Contains(out, "__complete") {
			t.Errorf("completion %s: status %d, %d bytes, %s", sh, status, len(out), errOut)
		}
	}
}
