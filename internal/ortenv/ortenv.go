// Package ortenv gives tests the ONNX Runtime library. It is separate from
// testenv so that graph's own tests, which testenv serves, do not depend on
// the runtime.
package ortenv

import (
	"os"
	"testing"

	"github.com/optc-dev/optc/ort"
)

// Require loads the ONNX Runtime library (see ort.Init) or skips the test
// when it is missing; under CI (CI=true) a missing library is a failure.
func Require(t testing.TB) {
	t.Helper()
	if _, err := ort.Init(""); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
}
