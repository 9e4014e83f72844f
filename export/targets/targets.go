// Package targets registers every deployment target optc build knows, in
// build order. Adding a target is one package under export/ and one entry
// here; importing this package (build does) makes them known to config,
// build, optc lint and the CLI's help and completion.
package targets

import (
	"github.com/optc-dev/optc/export/openvino"
	"github.com/optc-dev/optc/export/ort"
	"github.com/optc-dev/optc/export/ortmobile"
	"github.com/optc-dev/optc/export/target"
	"github.com/optc-dev/optc/export/tensorrt"
	"github.com/optc-dev/optc/export/triton"
)

func init() {
	target.Register(
		ort.Target{},
		tensorrt.Target{},
		triton.Target{},
		openvino.Target{},
		ortmobile.Target{},
	)
}
