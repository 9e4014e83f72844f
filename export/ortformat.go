package export

import (
	"fmt"
	"os"
	"slices"

	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/ort"
)

// WriteORTFormat has ONNX Runtime optimize src at so's level and write the
// result in its own format to dst (how the ort and ort-mobile targets
// make their .ort files). A model the format cannot hold is not an
// error: skipped then says why, and dst is not written. Such a model
// keeps its tensors in a side file (over protobuf's 2 GiB), or has an
// input or output that is not a tensor (ORT: "We do not support type
// [9]" for an optional).
func WriteORTFormat(src, dst string, so ort.Options) (skipped string, err error) {
	if _, err := os.Stat(src + ".data"); err == nil {
		return "it keeps its tensors in a side file (over 2 GiB), which the ORT format cannot hold", nil
	}
	m, err := graph.LoadFile(src)
	if err != nil {
		return "", err
	}
	ins, outs := ort.Interface(m)
	m.Close()
	so.OptimizedModelPath = dst
	sess, err := ort.NewSession(ort.Source{Path: src, Inputs: ins, Outputs: outs}, so)
	if note := nonTensorNote(ins, outs); err != nil && note != "" {
		return fmt.Sprintf("ONNX Runtime cannot write it in the ORT format%s: %v", note, err), nil
	}
	if err != nil {
		return "", fmt.Errorf("writing %s: %w", dst, err)
	}
	if err := sess.Close(); err != nil {
		return "", err
	}
	if _, err := os.Stat(dst); err != nil {
		return "", fmt.Errorf("ONNX Runtime did not write %s: %w", dst, err)
	}
	return "", nil
}

// nonTensorNote names the first value of the interface that is not a
// tensor, which is what the ORT format fails on, or says nothing.
func nonTensorNote(ins, outs []ort.IO) string {
	for _, io := range append(slices.Clone(ins), outs...) {
		if io.Kind != graph.KindTensor && io.Kind != graph.KindUnknown {
			return fmt.Sprintf(" (%q is %s, not a tensor)", io.Name, io.NotExpressible())
		}
	}
	return ""
}
