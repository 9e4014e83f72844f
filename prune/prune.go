// Package prune removes weights on purpose: unstructured magnitude
// pruning, 2:4 semi-structured sparsity for sparse tensor cores, and
// structured channel pruning that makes a model really smaller. Unlike the
// passes, these change what a model computes, so they are opt-in and the
// caller measures what they cost.
package prune

import (
	"fmt"
	"strconv"
	"strings"
)

// Method is one pruning request, as written on the command line:
// magnitude:S, 2:4, channels:R or channels:auto.
type Method struct {
	Kind  string  // "magnitude", "2:4" or "channels"
	Ratio float64 // sparsity S or channel fraction R; unused for 2:4
	// Auto (channels:auto) leaves the ratio to a budget search by the
	// caller (optimize): Apply refuses it.
	Auto bool
}

// AutoRatios are the channel ratios channels:auto tries, largest first.
var AutoRatios = []float64{0.5, 0.375, 0.25, 0.125}

func (m Method) String() string {
	if m.Kind == "2:4" {
		return "2:4"
	}
	if m.Auto {
		return m.Kind + ":auto"
	}
	return fmt.Sprintf("%s:%g", m.Kind, m.Ratio)
}

// ParseMethod reads magnitude:S, 2:4, channels:R with 0 <= S, R < 1, or
// channels:auto.
func ParseMethod(s string) (Method, error) {
	switch s {
	case "2:4":
		return Method{Kind: "2:4"}, nil
	case "channels:auto":
		return Method{Kind: "channels", Auto: true}, nil
	}
	kind, val, ok := strings.Cut(s, ":")
	if !ok || (kind != "magnitude" && kind != "channels") {
		return Method{}, fmt.Errorf("--prune %q: want magnitude:S, 2:4, channels:R or channels:auto", s)
	}
	r, err := strconv.ParseFloat(val, 64)
	if err != nil || r < 0 || r >= 1 {
		return Method{}, fmt.Errorf("--prune %q: the ratio must be a number in [0, 1)", s)
	}
	return Method{Kind: kind, Ratio: r}, nil
}

// Options shape what is pruned.
type Options struct {
	// Scope is ScopeLayer (each layer to the ratio) or ScopeGlobal (one
	// magnitude threshold over all prunable weights); magnitude only here
	// (optimize resolves channels:R's global form into PerLayer).
	Scope string
	// Exclude names nodes (or their weight initializers) to leave alone.
	Exclude []string
	// MinElements skips weights with fewer elements (default 1024): tiny
	// tensors save nothing and often matter most.
	MinElements int64
	// PerLayer overrides the ratio for named nodes (what the accuracy
	// budget search settles on).
	PerLayer map[string]float64
	// ChannelMultiple rounds the channels a layer keeps up to a multiple
	// (channels:R; default 8, 1 for exact counts): ONNX Runtime's CPU
	// kernels block channels by 8 or 16 (NCHWc), and an odd count costs
	// padding and reorders that can make a pruned model slower.
	ChannelMultiple int64
	// Data, when set, makes the methods data-driven: channels:R chooses
	// channels by the error they leave in the layers that read them and
	// refits those layers by least squares (Reconstruct); magnitude:S and
	// 2:4 choose masks and update the kept weights by OBS (SparseGPT).
	Data *Data
	// keep, when set, restricts Channels to the groups named by their
	// first source layer, keeping the channels given (Reconstruct's steps).
	keep map[string][]int
}

// multiple is ChannelMultiple with its default.
// ChannelStep is ChannelMultiple with its default: the channels a layer
// keeps are a multiple of it.
func (o Options) ChannelStep() int64 {
	if o.ChannelMultiple <= 0 {
		return 8
	}
	return o.ChannelMultiple
}

// The prune scopes: the one list flags, the config, completion and
// messages use.
const (
	ScopeLayer  = "layer"
	ScopeGlobal = "global"
)

// Scopes lists them, the default first.
var Scopes = []string{ScopeLayer, ScopeGlobal}
