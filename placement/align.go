package placement

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"time"

	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/ort"
	"github.com/optc-dev/optc/passes"
	"github.com/optc-dev/optc/quantize"
	"github.com/optc-dev/optc/report/schema"
)

// aligned returns opts with Float padded to a multiple of channels and
// how many convs were padded: the calibration ranges carried over,
// KeepFloat turned into exclusions by name (node indices move in the
// padded graph). When no conv needed it, or a KeepFloat node has no name
// to find it by, it returns 0 and opts unchanged.
func aligned(opts Options, channels int) (Options, int, error) {
	if corrected(opts.Quant) {
		return opts, 0, nil
	}
	m, err := opts.Float.Parse()
	if err != nil {
		return opts, 0, err
	}
	rep, err := passes.Run(m, passes.Pipeline(passes.ORTInt8Layout), passes.Options{ChannelBlock: channels})
	if err != nil {
		return opts, 0, fmt.Errorf("aligning conv channels: %w", err)
	}
	convs := 0
	for _, p := range rep.Passes {
		if p.Name == "pad-conv-channels" {
			convs = p.Stats.Rewritten
		}
	}
	if convs == 0 {
		return opts, 0, nil
	}
	float, err := graph.MarshalReferencing(m)
	if err != nil {
		return opts, 0, err
	}
	quant, ok, err := keepFloatByName(opts.Float, opts.Quant)
	if err != nil || !ok {
		return opts, 0, err
	}
	opts.Float, opts.Ranges, opts.Quant = float, alignedRanges(m, opts.Ranges), quant
	return opts, convs, nil
}

// Aligned returns what f's INT8 model was quantized from: float, its
// calibration ranges and the quantization options, padded as f.Aligned
// says, or as they are.
func Aligned(f *schema.Placement, float graph.Serialized, ranges map[string][2]float64, quant quantize.Options) (graph.Serialized, map[string][2]float64, quantize.Options, error) {
	if f == nil || f.Aligned == nil || !f.Aligned.Chosen {
		return float, ranges, quant, nil
	}
	o, _, err := aligned(Options{Float: float, Ranges: ranges, Quant: quant}, f.Aligned.Channels)
	return o.Float, o.Ranges, o.Quant, err
}

// corrected says the quantization carries per-channel corrections of the
// model as given (GPTQ's rounded weights, bias correction's shifts): a
// padded model's weights have other shapes, so it would lose them.
func corrected(quant quantize.Options) bool {
	return len(quant.Rounded) > 0 || len(quant.BiasShift) > 0
}

// alignedRanges gives the Slices the padding added (back to a tensor's
// real channels) their input's calibration range: a Slice keeps values.
// Every other value keeps its name and range; a padded channel holds a
// constant inside it (0, or what a channel-wise op makes of 0).
func alignedRanges(padded *graph.Model, ranges map[string][2]float64) map[string][2]float64 {
	out := maps.Clone(ranges)
	for _, n := range padded.Graph.Nodes {
		if n.OpType != "Slice" {
			continue
		}
		if _, ok := out[n.Output(0).Name]; ok {
			continue
		}
		if r, ok := ranges[n.Input(0).Name]; ok {
			out[n.Output(0).Name] = r
		}
	}
	return out
}

// keepFloatByName turns opts.KeepFloat (node indices into float's graph)
// into exclusions by node name, which hold in the padded model too; not
// ok when one of those nodes has no name (the model is then not padded).
func keepFloatByName(float graph.Serialized, opts quantize.Options) (quantize.Options, bool, error) {
	if len(opts.KeepFloat) == 0 {
		return opts, true, nil
	}
	m, err := float.Parse()
	if err != nil {
		return opts, false, err
	}
	opts.Exclude = slices.Clone(opts.Exclude)
	for _, i := range opts.KeepFloat {
		if i < 0 || i >= len(m.Graph.Nodes) || m.Graph.Nodes[i].Name == "" {
			return opts, false, nil
		}
		opts.Exclude = append(opts.Exclude, "^"+regexp.QuoteMeta(m.Graph.Nodes[i].Name)+"$")
	}
	opts.KeepFloat = nil
	return opts, true, nil
}

// align is the search's alignment step: it pads opts.Float to
// ort.Int8ChannelAlign, quantizes it like all, times the two all-INT8
// models at each batch size (timePair; a quarter of the time left at
// most), and returns the options (and all-INT8 model) the candidates are
// built from, with the record. Nothing is tried on a CPU without the
// kernels or a model whose channels are aligned already (a nil record).
func align(opts Options, all *quantized, clk *clock) (Options, *quantized, *schema.Alignment, error) {
	channels := ort.Int8ChannelAlign()
	if channels == 0 {
		return opts, all, nil, nil
	}
	if corrected(opts.Quant) {
		opts.progress("placement: conv channels not padded: GPTQ's weights and bias correction are per channel of the model as given")
		return opts, all, nil, nil
	}
	padded, convs, err := aligned(opts, channels)
	if err != nil || convs == 0 {
		return opts, all, nil, err
	}
	if !clk.fits("aligning conv channels", clk.quantize+clk.pairTiming(opts.Batches), 0) {
		return opts, all, nil, nil
	}
	opts.progress("placement: all-INT8 with conv channels padded to %d (%d convs) against all-INT8 as given", channels, convs)
	var q *quantized
	d, err := clk.step(func() (err error) {
		q, err = quantizeKeeping(padded.Float, padded.Ranges, padded.Quant, nil)
		return err
	})
	clk.quantize = max(clk.quantize, d)
	if err != nil {
		return opts, all, nil, fmt.Errorf("quantizing the padded model: %w", err)
	}
	rec := &schema.Alignment{Channels: channels, Convs: convs}
	// A quarter of the time left at most, so that the search keeps its own.
	if rec.Timings, rec.Chosen, err = timePair(opts, clk, all.serialized, q.serialized, time.Now().Add(time.Until(clk.deadline)/4)); err != nil {
		return opts, all, nil, fmt.Errorf("timing the padded model: %w", err)
	}
	if rec.Chosen && opts.Accept != nil {
		// The search's lazy check takes all-INT8 as known to keep the
		// accuracy budget (it is the guard's model); the padded one is
		// checked before it stands in for it.
		opts.progress("placement: checking the accuracy of all-INT8 with conv channels padded")
		var ok bool
		if _, err := clk.step(func() (err error) { ok, err = opts.Accept(q.serialized); return err }); err != nil {
			return opts, all, nil, fmt.Errorf("checking the padded model: %w", err)
		}
		if !ok {
			rec.Chosen, rec.Rejected = false, "all-INT8 of the padded model misses the accuracy budget"
		}
	}
	if !rec.Chosen {
		return opts, all, rec, nil
	}
	return padded, q, rec, nil
}
