package build

import (
	"fmt"

	"github.com/optc-dev/optc/data"
	"github.com/optc-dev/optc/ptq"
	"github.com/optc-dev/optc/report/schema"
)

// DynamicModel is the dynamic INT8 model of the ORT artifact
// (quantize.dynamic).
const DynamicModel = "model.int8.dynamic.onnx"

// dynamic makes the ORT (and Triton) artifact dynamic INT8
// (quantize.dynamic): the optimized float model's MatMul/Gemm weights
// become int8 and their activations are quantized at run time. ptq
// measures it against float and holds it to the accuracy guard; like
// every artifact it is then checked and timed against the input in the
// verify stage. It takes the place of the static ort INT8 model.
func (b *builder) dynamic() error {
	rel := DynamicModel
	out, err := b.dir.path(rel)
	if err != nil {
		return err
	}
	o, err := b.ptqOptions(PlacedScheme, out)
	if err != nil {
		return err
	}
	o.Dynamic, o.Placement, o.CalibCache = true, "", ""
	if !b.res.EvalHeldOut {
		// Nothing is calibrated: the calibration data is held out too.
		o.EvalData, o.EvalOpts = "", data.Options{}
	}
	if o.CalibData == "" && o.EvalData == "" {
		o.EvalData, o.EvalOpts = "random", b.dataOptions("random", 0, ptq.RandomSamples)
	}
	if b.res.Dynamic, err = ptq.Run(o); err != nil {
		return err
	}
	b.ortModel, b.ortPrecision = out, "int8-dynamic"
	b.add(rel, string(PlacedScheme), "model", "int8-dynamic", "")
	if g := b.res.Dynamic.Guard; g != nil && g.Allowed {
		b.ortModel = b.float
		b.note(fmt.Sprintf("ort: %s misses the accuracy guard (%s); kept because of allow_accuracy_loss, not recommended: the ORT and Triton artifacts are FP32", rel, schema.FailedChecks(g.Checks)))
	}
	return nil
}
