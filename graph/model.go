package graph

import (
	"slices"

	"github.com/optc-dev/optc/onnxpb"
)

// OpsetImport is one operator set the model uses. Domain "" is the default
// ONNX domain.
type OpsetImport struct {
	Domain  string
	Version int64
}

// Model is a loaded ONNX model: metadata, opset imports and the main graph.
// Functions, training information and device configurations are carried as
// loaded (passes do not look inside them).
type Model struct {
	IRVersion       int64
	Opsets          []OpsetImport
	ProducerName    string
	ProducerVersion string
	Domain          string
	ModelVersion    int64
	DocString       string
	Metadata        []*onnxpb.StringStringEntryProto
	Graph           *Graph

	Functions     []*onnxpb.FunctionProto
	TrainingInfo  []*onnxpb.TrainingInfoProto
	Configuration []*onnxpb.DeviceConfigurationProto

	// Path is the file the model was loaded from ("" for bytes).
	Path string

	origin   *onnxpb.ModelProto
	opsetsAt []*onnxpb.OperatorSetIdProto
	ext      *externalSource
	closers  []func() error
}

// OpsetVersion returns the imported version of domain ("" or "ai.onnx" for
// the default domain), or 0 when the model does not import it.
func (m *Model) OpsetVersion(domain string) int64 {
	domain = canonicalDomain(domain)
	for _, o := range m.Opsets {
		if canonicalDomain(o.Domain) == domain {
			return o.Version
		}
	}
	return 0
}

// Close releases the memory maps that back the model's tensors. Tensor data
// must not be used afterwards.
func (m *Model) Close() error {
	var first error
	for _, c := range m.closers {
		if err := c(); err != nil && first == nil {
			first = err
		}
	}
	m.closers = nil
	return first
}

// SideFiles are the external-data locations the main graph's initializers
// refer to, sorted, each once.
func (m *Model) SideFiles() []string {
	var locs []string
	for _, v := range m.Graph.Initializers {
		if e := v.Const.External(); e != nil && !slices.Contains(locs, e.Location) {
			locs = append(locs, e.Location)
		}
	}
	slices.Sort(locs)
	return locs
}

func canonicalDomain(d string) string {
	if d == "ai.onnx" {
		return ""
	}
	return d
}
