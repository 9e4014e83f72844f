// Package cirecipe runs docs/ci.md's GitHub Actions recipe end to end
// (make ci-recipe): it makes a model repository (models, data, optc.yaml,
// no optc source) in a temporary folder with an empty HOME, publishes optc
// on a local Go module proxy, serves the ONNX Runtime tarball from a local
// npm-shaped registry, and runs every run: step of the page's workflow as
// written (go install, optc runtime install, both builds, optc diff, the
// comment, the gate), with gh stubbed. Without OPTC_CI_RECIPE it is skipped.
package cirecipe
