package prune

import (
	"fmt"

	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/report/schema"
)

// Apply runs one pruning method over m; with opts.Data, its data-driven
// form.
func Apply(m *graph.Model, meth Method, opts Options) (*schema.PruneReport, error) {
	if meth.Auto {
		return nil, fmt.Errorf("%s: the ratio comes from a budget search (optc optimize --max-accuracy-drop or --min-cosine); give a ratio here", meth)
	}
	if opts.Data != nil {
		switch meth.Kind {
		case "magnitude", "2:4":
			return OBS(m, meth, opts, opts.Data)
		case "channels":
			return Reconstruct(m, meth.Ratio, opts, opts.Data)
		}
	}
	switch meth.Kind {
	case "magnitude":
		return Magnitude(m, meth.Ratio, opts)
	case "2:4":
		return SemiStructured(m, opts)
	case "channels":
		return Channels(m, meth.Ratio, opts)
	}
	return nil, fmt.Errorf("unknown pruning method %q", meth.Kind)
}
