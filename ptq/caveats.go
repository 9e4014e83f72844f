package ptq

import "fmt"

// MinCheckSamples is the fewest samples a check's figures are trusted on;
// below it they are printed with a warning.
const MinCheckSamples = 32

// Caveats are what makes a measurement weaker than its figures look:
// ranges calibrated on random inputs, a check run on the very samples
// calibration saw, or a check on fewer than MinCheckSamples samples.
// optc quantize, the build table, report.json/md and optc diff all print
// Lines, so the warning reads the same everywhere.
type Caveats struct {
	// RandomCalibration says the ranges came from random inputs.
	RandomCalibration bool `json:"random_calibration"`
	// OnCalibrationData says the checks ran on the calibration samples.
	OnCalibrationData bool `json:"checked_on_calibration_data"`
	// CheckSamples is how many samples the checks ran on (the fewest
	// over the models checked; 0 when nothing was checked).
	CheckSamples int64 `json:"check_samples"`
	// RandomCheck says the checks ran on random inputs: agreement with
	// float on noise, a smoke test.
	RandomCheck bool `json:"checked_on_random_data,omitempty"`
}

// Lines are the caveats as warning sentences, none when there is none.
func (c Caveats) Lines() []string {
	var l []string
	if c.RandomCalibration {
		l = append(l, "calibrated on random data: ranges do not reflect real inputs")
	}
	if c.RandomCheck {
		l = append(l, "checked on random inputs: a smoke test, not a measure of accuracy (give eval data like the deployment's)")
	}
	if c.OnCalibrationData {
		l = append(l, "checked on the calibration samples themselves: the accuracy figures are not held out")
	}
	if c.CheckSamples > 0 && c.CheckSamples < MinCheckSamples {
		l = append(l, fmt.Sprintf("checked on only %d samples (fewer than %d): the accuracy figures are thin", c.CheckSamples, MinCheckSamples))
	}
	return l
}

// caveats is what a quantization's own measurement rests on.
func (r *Result) caveats(opts Options) Caveats {
	c := Caveats{RandomCalibration: opts.CalibData == "random" && !r.Calibration.FromCache}
	if r.Accuracy != nil {
		c.OnCalibrationData, c.CheckSamples = !r.HeldOut, r.Accuracy.Samples
		c.RandomCheck = r.Accuracy.Data == "random"
	}
	return c
}
