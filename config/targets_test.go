package config_test

// The targets register themselves into config.Targets; the tests of this
// package check names against the real registry.
import _ "github.com/optc-dev/optc/export/targets"
