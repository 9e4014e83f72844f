package calibrate

import (
	"fmt"

	"github.com/optc-dev/optc/config"
)

// The build config's calibration section is calibrate's: its defaults and
// rules live here, beside the methods they name.
func init() {
	config.Register(config.Owner{Name: "calibrate", Section: "calibration", Defaults: configDefaults, Rules: configRules})
}

func configDefaults(c *config.Config) {
	cal := &c.Calibration
	cal.Batch, cal.Seed, cal.Method, cal.Percentile = 8, 1, string(DefaultMethod), DefaultPercentile
}

func configRules(c config.Config) []string {
	var bad []string
	cal := c.Calibration
	if _, err := ParseMethod(cal.Method); err != nil {
		bad = append(bad, fmt.Sprintf("calibration.method: %q (want %s)", cal.Method, MethodNames()))
	}
	if p := cal.Percentile; p <= 0 || p > 100 {
		bad = append(bad, fmt.Sprintf("calibration.percentile: %g (want 0 < p <= 100)", p))
	}
	if a := cal.MovingAverage; a < 0 || a >= 1 {
		bad = append(bad, fmt.Sprintf("calibration.moving_average: %g (want 0 <= a < 1)", a))
	}
	if cal.Batch < 1 {
		bad = append(bad, fmt.Sprintf("calibration.batch: %d (want at least 1)", cal.Batch))
	}
	if cal.Samples < 0 {
		bad = append(bad, fmt.Sprintf("calibration.samples: %d must not be negative", cal.Samples))
	}
	return bad
}
