package build

import (
	"fmt"
	"slices"

	"github.com/optc-dev/optc/config"
	"github.com/optc-dev/optc/internal/choice"
	"github.com/optc-dev/optc/ort"
)

// The build config's runtime section is the build's: how it runs and
// measures every artifact, and its nchwc stage (layout.go).
func init() {
	config.Register(config.Owner{Name: "build", Section: "runtime", Defaults: configDefaults, Rules: configRules, Joins: configJoins})
}

// NCHWcChoices is what runtime.nchwc (--nchwc) takes.
var NCHWcChoices = []string{"auto", "on", "off", "8", "16"}

func configDefaults(c *config.Config) {
	c.Runtime.Level, c.Runtime.NCHWc = "all", "auto"
}

func configRules(c config.Config) []string {
	var bad []string
	r := c.Runtime
	if !slices.Contains(ort.Levels, r.Level) {
		bad = append(bad, fmt.Sprintf("runtime.level: %q (want %s)", r.Level, choice.Or(ort.Levels)))
	}
	if !slices.Contains(NCHWcChoices, r.NCHWc) {
		bad = append(bad, fmt.Sprintf("runtime.nchwc: %q (want %s)", r.NCHWc, choice.Or(NCHWcChoices)))
	}
	if r.Threads < 0 {
		bad = append(bad, fmt.Sprintf("runtime.threads: %d must not be negative", r.Threads))
	}
	return bad
}

func configJoins(c config.Config) []string {
	if c.Replay != "" && c.Runtime.NCHWc != "auto" {
		return []string{fmt.Sprintf("runtime.nchwc: %q with replay, which sets the nchwc stage from its record (leave it auto)", c.Runtime.NCHWc)}
	}
	return nil
}
