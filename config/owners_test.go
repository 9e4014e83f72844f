package config_test

import (
	"testing"

	"github.com/optc-dev/optc/config"
	"github.com/optc-dev/optc/export/tensorrt"

	// The owners of the config's sections register themselves (the
	// stages through build, the targets through export/targets): the
	// tests of this package check names against the real owners.
	_ "github.com/optc-dev/optc/build"
	_ "github.com/optc-dev/optc/export/targets"
)

// TestDefaultIsValid: with every owner linked, the defaults pass every
// rule, and each owned section has an owner.
func TestDefaultIsValid(t *testing.T) {
	if err := config.Default().Validate(); err != nil {
		t.Fatal(err)
	}
	if d := config.Default(); d.Calibration.Method == "" || d.Quantize.Placement == "" || d.Runtime.Level == "" || d.Image.Layout == "" || tensorrt.SectionOf(&d).Version == "" {
		t.Fatalf("an owner's defaults are missing: %+v", d)
	}
}
