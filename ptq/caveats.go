package ptq

import "github.com/optc-dev/optc/report/schema"

// caveats is what a quantization's own measurement rests on.
func (r *Result) caveats(opts Options) schema.Caveats {
	c := schema.Caveats{RandomCalibration: opts.CalibData == "random" && !r.Calibration.FromCache}
	if r.Accuracy != nil {
		c.OnCalibrationData, c.CheckSamples = !r.HeldOut, r.Accuracy.Samples
		c.RandomCheck = r.Accuracy.Data == "random"
	}
	return c
}
