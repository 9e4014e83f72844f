package graph

import (
	"os"
	"slices"
	"strings"
)

// Summary is what `optc inspect` reports about a model. Its JSON form is
// documented in docs/inspect.md.
type Summary struct {
	Path            string            `json:"path,omitempty"`
	FileBytes       int64             `json:"file_bytes"`
	IRVersion       int64             `json:"ir_version"`
	Opsets          []OpsetSummary    `json:"opsets"`
	ProducerName    string            `json:"producer_name"`
	ProducerVersion string            `json:"producer_version"`
	GraphName       string            `json:"graph_name"`
	Inputs          []ValueSummary    `json:"inputs"`
	Outputs         []ValueSummary    `json:"outputs"`
	Nodes           int               `json:"nodes"`
	NodesTotal      int               `json:"nodes_total"`
	Subgraphs       int               `json:"subgraphs"`
	Functions       int               `json:"functions"`
	OpTypes         []OpCount         `json:"op_types"`
	Parameters      ParamSummary      `json:"parameters"`
	External        ExternalSum       `json:"external_data"`
	Metadata        map[string]string `json:"metadata,omitempty"`
}

// OpsetSummary is one imported operator set; the default domain is "ai.onnx".
type OpsetSummary struct {
	Domain  string `json:"domain"`
	Version int64  `json:"version"`
}

// ValueSummary describes a graph input or output.
type ValueSummary struct {
	Name  string   `json:"name"`
	DType string   `json:"dtype"`
	Shape []string `json:"shape"` // each dim a number, a symbol, or "?"; null when the rank is unknown
	Type  string   `json:"type"`  // the two together, e.g. float32[N,3,224,224]
}

// OpCount is how many nodes of one op type the model has (subgraphs included).
type OpCount struct {
	Op    string `json:"op"`
	Count int    `json:"count"`
}

// ParamSummary counts constant data: initializers and Constant nodes.
type ParamSummary struct {
	Count         int64 `json:"count"` // elements
	Bytes         int64 `json:"bytes"`
	Initializers  int   `json:"initializers"`
	ConstantNodes int   `json:"constant_nodes"`
}

// ExternalSum describes tensor data held in side files.
type ExternalSum struct {
	Files   []string `json:"files"`
	Tensors int      `json:"tensors"`
	Bytes   int64    `json:"bytes"`
}

// Summarize gathers the facts `optc inspect` shows.
func Summarize(m *Model) *Summary {
	s := &Summary{
		Path: m.Path, IRVersion: m.IRVersion,
		ProducerName: m.ProducerName, ProducerVersion: m.ProducerVersion,
		GraphName: m.Graph.Name, Nodes: len(m.Graph.Nodes), Functions: len(m.Functions),
		External: ExternalSum{Files: []string{}},
	}
	if m.Path != "" {
		if fi, err := os.Stat(m.Path); err == nil {
			s.FileBytes = fi.Size()
		}
	}
	for _, o := range m.Opsets {
		d := o.Domain
		if d == "" {
			d = "ai.onnx"
		}
		s.Opsets = append(s.Opsets, OpsetSummary{Domain: d, Version: o.Version})
	}
	s.Inputs = summarizeValues(m.Graph.Inputs, true)
	s.Outputs = summarizeValues(m.Graph.Outputs, false)
	if len(m.Metadata) > 0 {
		s.Metadata = map[string]string{}
		for _, kv := range m.Metadata {
			s.Metadata[kv.GetKey()] = kv.GetValue()
		}
	}
	ops := map[string]int{}
	addTensor := func(t *Tensor) {
		n, _ := t.NumElements()
		s.Parameters.Count += n
		if t.DType == String {
			if strs, err := t.Strings(); err == nil {
				for _, b := range strs {
					s.Parameters.Bytes += int64(len(b))
				}
			}
		} else {
			s.Parameters.Bytes += t.ByteSize()
		}
		if e := t.External(); e != nil {
			s.External.Tensors++
			s.External.Bytes += t.ByteSize()
			if !slices.Contains(s.External.Files, e.Location) {
				s.External.Files = append(s.External.Files, e.Location)
			}
		}
	}
	m.Graph.Walk(func(g *Graph) {
		if g != m.Graph {
			s.Subgraphs++
		}
		s.NodesTotal += len(g.Nodes)
		for _, v := range g.Initializers {
			s.Parameters.Initializers++
			addTensor(v.Const)
		}
		for _, n := range g.Nodes {
			op := n.OpType
			if n.Domain != "" && n.Domain != "ai.onnx" {
				op = n.Domain + "." + op
			}
			ops[op]++
			if n.OpType == "Constant" && n.Domain == "" {
				if a := n.Attr("value"); a != nil && a.Tensor != nil {
					s.Parameters.ConstantNodes++
					addTensor(a.Tensor)
				}
			}
		}
	})
	for op, c := range ops {
		s.OpTypes = append(s.OpTypes, OpCount{Op: op, Count: c})
	}
	slices.SortFunc(s.OpTypes, func(a, b OpCount) int {
		if a.Count != b.Count {
			return b.Count - a.Count
		}
		return strings.Compare(a.Op, b.Op)
	})
	slices.Sort(s.External.Files)
	return s
}

// summarizeValues describes graph inputs or outputs; initializers listed
// as inputs (old IR style) are not inputs a caller must feed, so they are
// left out.
func summarizeValues(vs []*Value, inputs bool) []ValueSummary {
	out := []ValueSummary{}
	for _, v := range vs {
		if inputs && v.Const != nil {
			continue
		}
		vsum := ValueSummary{Name: v.Name, DType: "?", Type: v.Type.String()}
		if t := v.Type; t != nil {
			if t.Kind == KindTensor || t.Kind == KindSparseTensor {
				vsum.DType = t.Elem.String()
			}
			if t.Shape != nil {
				vsum.Shape = make([]string, len(t.Shape))
				for i, d := range t.Shape {
					vsum.Shape[i] = d.String()
				}
			}
		}
		out = append(out, vsum)
	}
	return out
}
