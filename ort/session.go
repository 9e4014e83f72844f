package ort

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"unsafe"

	ortgo "github.com/yalue/onnxruntime_go"

	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/internal/choice"
)

// Level is ONNX Runtime's graph optimization level.
type Level int

// The levels, as ORT names them.
const (
	LevelDisable Level = iota
	LevelBasic
	LevelExtended
	LevelAll
)

// Levels are the level names ParseLevel reads, in order: the one list
// flags, the build config, completion and messages use.
var Levels = []string{"disable", "basic", "extended", "all"}

// Providers are the execution providers a session can ask for.
var Providers = []string{"cpu", "cuda", "tensorrt"}

func (l Level) String() string {
	if l >= 0 && int(l) < len(Levels) {
		return Levels[l]
	}
	return fmt.Sprintf("level(%d)", int(l))
}

// ParseLevel reads disable, basic, extended or all.
func ParseLevel(s string) (Level, error) {
	for i, n := range Levels {
		if strings.EqualFold(s, n) {
			return Level(i), nil
		}
	}
	return 0, fmt.Errorf("unknown ORT optimization level %q (want %s)", s, choice.Or(Levels))
}

func (l Level) ortLevel() ortgo.GraphOptimizationLevel {
	switch l {
	case LevelDisable:
		return ortgo.GraphOptimizationLevelDisableAll
	case LevelBasic:
		return ortgo.GraphOptimizationLevelEnableBasic
	case LevelExtended:
		return ortgo.GraphOptimizationLevelEnableExtended
	}
	return ortgo.GraphOptimizationLevelEnableAll
}

// Options configure a session. The zero value is CPU, level disable, and
// ORT's default thread counts; DefaultOptions is what commands use.
type Options struct {
	Level          Level
	IntraOpThreads int    // 0: ORT's default (one per core)
	InterOpThreads int    // 0: ORT's default
	Provider       string // cpu (default), cuda or tensorrt
	// OptimizedModelPath, when set, makes ORT write the model it optimized
	// there (ORT format when the name ends in .ort).
	OptimizedModelPath string
	// ProfilePrefix, when set, turns on ORT's profiler; the trace is
	// written to a file starting with it when the session closes.
	ProfilePrefix string
	// NoMemArena turns off ORT's CPU memory arena: a run's memory goes
	// back when the run ends instead of staying with the session for the
	// next one. For several sessions held open at once, each run in turn
	// (calibration's runs over parts of a large model's activations),
	// so that what they hold does not add up.
	NoMemArena bool
	// NoSpinning stops the intra-op threads from spinning after a run
	// (ORT's session.intra_op.allow_spinning 0): they block at once. For
	// two sessions timed in turns on the same cores, where one's threads
	// still spinning would slow the other's next runs.
	NoSpinning bool
}

// DefaultOptions is level all on the CPU with ORT's thread defaults.
func DefaultOptions() Options { return Options{Level: LevelAll, Provider: "cpu"} }

// IO describes a session input or output.
type IO struct {
	Name string
	// Kind is tensor, or sequence, map, optional...; KindUnknown when the
	// model does not declare a type (NewSession then asks ORT).
	Kind  graph.TypeKind
	DType graph.DataType
	Shape []int64 // -1 for a dynamic dimension; nil when the rank is unknown
}

// ErrRun marks ONNX Runtime's refusal to run a model on the inputs given
// (its message names the node and op that rejected them).
var ErrRun = errors.New("ONNX Runtime failed to run the model")

// ErrNotExpressible is wrapped by the errors for a value optc cannot pass
// through the ORT binding: anything but a non-string tensor.
var ErrNotExpressible = errors.New("not expressible through the ORT binding")

// NotExpressible says what io is when optc cannot feed or fetch it through
// the binding ("a sequence", "a string tensor"), and "" when it can.
// onnxruntime_go v1.27.0 crashes the process (SIGSEGV) fetching an empty
// optional output, so such outputs must never reach a run.
func (io IO) NotExpressible() string {
	switch io.Kind {
	case graph.KindTensor, graph.KindUnknown:
		if io.DType == graph.String {
			return "a string tensor"
		}
		return ""
	case graph.KindSparseTensor:
		return "a sparse tensor"
	case graph.KindSequence:
		return "a sequence"
	case graph.KindMap:
		return "a map"
	case graph.KindOptional:
		return "an optional"
	}
	return "an opaque value"
}

// SplitOutputs returns the outputs the binding can fetch and, for each it
// cannot, one line saying why.
func SplitOutputs(outs []IO) (kept []IO, skipped []string) {
	for _, o := range outs {
		if what := o.NotExpressible(); what != "" {
			skipped = append(skipped, fmt.Sprintf("output %q is %s: %s", o.Name, what, ErrNotExpressible))
			continue
		}
		kept = append(kept, o)
	}
	return kept, skipped
}

// Source is a model to open a session on: a file (needed when the model
// has external data, which ORT reads relative to the file) or bytes.
type Source struct {
	Path  string
	Bytes []byte
	// ExternalDir is where the side files Bytes refers to are (see
	// graph.MarshalReferencing); "" when Bytes holds every tensor.
	ExternalDir string
	// Inputs and Outputs are the model's interface, normally from the IR
	// (see Interface); the session feeds and fetches them in this order.
	Inputs, Outputs []IO
}

// SourceOf serializes m for a session: its bytes, with the tensors of a
// model over protobuf's 2 GiB limit left in their side files.
func SourceOf(m *graph.Model) (Source, error) {
	s, err := graph.MarshalReferencing(m)
	if err != nil {
		return Source{}, err
	}
	ins, outs := Interface(m)
	return SourceFrom(s, ins, outs), nil
}

// SourceFrom is a source for a serialized model with the given interface.
func SourceFrom(s graph.Serialized, ins, outs []IO) Source {
	return Source{Bytes: s.Bytes, ExternalDir: s.Dir, Inputs: ins, Outputs: outs}
}

// Interface returns the inputs a caller feeds (graph inputs without an
// initializer) and the outputs of m's main graph.
func Interface(m *graph.Model) (inputs, outputs []IO) {
	for _, v := range m.Graph.Inputs {
		if v.Const == nil {
			inputs = append(inputs, ioOf(v))
		}
	}
	for _, v := range m.Graph.Outputs {
		outputs = append(outputs, ioOf(v))
	}
	return inputs, outputs
}

func ioOf(v *graph.Value) IO {
	io := IO{Name: v.Name, Kind: kindOf(v)}
	if v.Type != nil {
		io.DType = v.Type.Elem
		io.Shape = v.Type.Shape.Dims()
	}
	return io
}

// kindOf is v's declared kind or, for an untyped value (an exposed
// intermediate, a value a rewrite added), what its producer tells: a
// constant or the output of an op that makes only tensors is a tensor.
// Otherwise it is unknown, and NewSession asks ORT, at the cost of
// loading the model once more.
func kindOf(v *graph.Value) graph.TypeKind {
	if v.Type != nil && v.Type.Kind != graph.KindUnknown {
		return v.Type.Kind
	}
	if v.Const != nil {
		return graph.KindTensor
	}
	n := v.Producer()
	if n == nil {
		return graph.KindUnknown
	}
	switch n.Domain {
	case "", "ai.onnx", "com.microsoft":
	default:
		return graph.KindUnknown
	}
	switch n.OpType {
	case "If", "Loop", "Identity", "Optional", "OptionalGetElement", "SequenceConstruct", "SequenceEmpty",
		"SequenceInsert", "SequenceErase", "SplitToSequence", "SequenceMap":
		return graph.KindUnknown
	}
	return graph.KindTensor
}

// Session is an ONNX Runtime inference session.
type Session struct {
	Inputs, Outputs []IO
	s               *ortgo.DynamicAdvancedSession
}

// NewSession opens a session. Init must have succeeded. An input the
// binding cannot feed is refused here; an output it cannot fetch (see
// IO.NotExpressible) may be named, but Run refuses it.
func NewSession(src Source, opts Options) (*Session, error) {
	if _, err := Version(); err != nil {
		return nil, err
	}
	src = resolveKinds(src)
	for _, in := range src.Inputs {
		if what := in.NotExpressible(); what != "" {
			return nil, fmt.Errorf("input %q is %s: %w", in.Name, what, ErrNotExpressible)
		}
	}
	names := func(ios []IO) []string {
		out := make([]string, len(ios))
		for i, io := range ios {
			out[i] = io.Name
		}
		return out
	}
	ins, outs := names(src.Inputs), names(src.Outputs)
	if err := probe(src, ins, outs, opts); err != nil {
		return nil, err
	}
	s, err := openSession(src, ins, outs, opts)
	if err != nil {
		return nil, err
	}
	return &Session{Inputs: src.Inputs, Outputs: src.Outputs, s: s}, nil
}

// resolveKinds returns src with the kinds of the values the model does not
// type taken from ORT's own view of the model.
func resolveKinds(src Source) Source {
	var kinds map[string]graph.TypeKind
	resolve := func(ios []IO) []IO {
		out := slices.Clone(ios)
		for i := range out {
			if out[i].Kind != graph.KindUnknown {
				continue
			}
			if kinds == nil {
				kinds = ortKinds(src)
			}
			out[i].Kind = kinds[out[i].Name]
		}
		return out
	}
	src.Inputs, src.Outputs = resolve(src.Inputs), resolve(src.Outputs)
	return src
}

// ortKinds returns the kind of each input and output as ORT sees the
// model, or nothing when it cannot tell (the load error comes later).
func ortKinds(src Source) map[string]graph.TypeKind {
	var ins, outs []ortgo.InputOutputInfo
	var err error
	switch {
	case src.Path != "":
		ins, outs, err = ortgo.GetInputOutputInfo(src.Path)
	case src.ExternalDir == "":
		ins, outs, err = ortgo.GetInputOutputInfoWithONNXData(src.Bytes)
	default:
		return map[string]graph.TypeKind{}
	}
	if err != nil {
		return map[string]graph.TypeKind{}
	}
	kinds := map[string]graph.TypeKind{} // not nil: asked once
	for _, io := range append(ins, outs...) {
		switch io.OrtValueType {
		case ortgo.ONNXTypeTensor:
			kinds[io.Name] = graph.KindTensor
		case ortgo.ONNXTypeSparseTensor:
			kinds[io.Name] = graph.KindSparseTensor
		case ortgo.ONNXTypeSequence:
			kinds[io.Name] = graph.KindSequence
		case ortgo.ONNXTypeMap:
			kinds[io.Name] = graph.KindMap
		case ortgo.ONNXTypeOptional:
			kinds[io.Name] = graph.KindOptional
		case ortgo.ONNXTypeUnknown:
		default:
			kinds[io.Name] = graph.KindOpaque
		}
	}
	return kinds
}

func configure(so *ortgo.SessionOptions, opts Options) error {
	if err := so.SetGraphOptimizationLevel(opts.Level.ortLevel()); err != nil {
		return err
	}
	if opts.IntraOpThreads > 0 {
		if err := so.SetIntraOpNumThreads(opts.IntraOpThreads); err != nil {
			return err
		}
	}
	if opts.InterOpThreads > 0 {
		if err := so.SetInterOpNumThreads(opts.InterOpThreads); err != nil {
			return err
		}
	}
	switch strings.ToLower(opts.Provider) {
	case "", "cpu":
	case "cuda":
		if err := appendProvider("cuda", ortgo.NewCUDAProviderOptions, so.AppendExecutionProviderCUDA); err != nil {
			return err
		}
	case "tensorrt":
		if err := appendProvider("tensorrt", ortgo.NewTensorRTProviderOptions, so.AppendExecutionProviderTensorRT); err != nil {
			return err
		}
	default:
		return fmt.Errorf("unknown execution provider %q (want %s)", opts.Provider, choice.Or(Providers))
	}
	if opts.OptimizedModelPath != "" {
		if strings.HasSuffix(opts.OptimizedModelPath, ".ort") {
			if err := so.AddSessionConfigEntry("session.save_model_format", "ORT"); err != nil {
				return err
			}
		}
		if err := so.SetOptimizedModelFilePath(opts.OptimizedModelPath); err != nil {
			return err
		}
	}
	if opts.ProfilePrefix != "" {
		if err := so.EnableProfiling(opts.ProfilePrefix); err != nil {
			return err
		}
	}
	if opts.NoMemArena {
		if err := so.SetCpuMemArena(false); err != nil {
			return err
		}
	}
	if opts.NoSpinning {
		if err := so.AddSessionConfigEntry("session.intra_op.allow_spinning", "0"); err != nil {
			return err
		}
	}
	return nil
}

// appendProvider adds execution provider name to a session's options:
// the binding gives each provider its own options type, made, appended
// and let go of the same way.
func appendProvider[P interface{ Destroy() error }](name string, newOptions func() (P, error), add func(P) error) error {
	opts, err := newOptions()
	if err != nil {
		return providerError(name, err)
	}
	defer opts.Destroy()
	if err := add(opts); err != nil {
		return providerError(name, err)
	}
	return nil
}

func providerError(name string, err error) error {
	return fmt.Errorf("execution provider %s is not available with this ONNX Runtime library (the CPU build from npm has no GPU providers): %s", name, oneLine(err))
}

func oneLine(err error) string { return strings.Join(strings.Fields(err.Error()), " ") }

// Close releases the session.
func (s *Session) Close() error {
	if s.s == nil {
		return nil
	}
	err := s.s.Destroy()
	s.s = nil
	return err
}

// Run feeds inputs (in the order of s.Inputs) and returns the outputs (in
// the order of s.Outputs) as tensors named after them.
func (s *Session) Run(inputs []*graph.Tensor) (res []*graph.Tensor, err error) {
	// The binding indexes its argument slices unchecked; a failure there
	// must be an error, not a crash.
	defer func() {
		if r := recover(); r != nil {
			res, err = nil, fmt.Errorf("the ORT binding failed: %v", r)
		}
	}()
	if len(s.Inputs) == 0 || len(s.Outputs) == 0 {
		return nil, fmt.Errorf("models without inputs or outputs are %w", ErrNotExpressible)
	}
	if len(inputs) != len(s.Inputs) {
		return nil, fmt.Errorf("the model has %d inputs, %d given", len(s.Inputs), len(inputs))
	}
	// A session may name such an output (ORT writes an optimized model
	// without running it), but fetching one can crash the binding.
	for _, o := range s.Outputs {
		if what := o.NotExpressible(); what != "" {
			return nil, fmt.Errorf("output %q is %s: %w", o.Name, what, ErrNotExpressible)
		}
	}
	in := make([]ortgo.Value, len(inputs))
	defer destroyAll(in)
	for i, t := range inputs {
		v, err := toORT(t)
		if err != nil {
			return nil, fmt.Errorf("input %q: %w", s.Inputs[i].Name, err)
		}
		in[i] = v
	}
	out := make([]ortgo.Value, len(s.Outputs))
	defer destroyAll(out)
	for i, o := range s.Outputs {
		v, err := preallocate(o)
		if err != nil {
			return nil, fmt.Errorf("output %q: %w", o.Name, err)
		}
		out[i] = v
	}
	if err := s.s.Run(in, out); err != nil {
		return nil, fmt.Errorf("%w: %s", ErrRun, oneLine(err))
	}
	res = make([]*graph.Tensor, len(out))
	for i, v := range out {
		t, err := fromORT(s.Outputs[i].Name, v)
		if err != nil {
			return nil, fmt.Errorf("output %q: %w", s.Outputs[i].Name, err)
		}
		res[i] = t
	}
	return res, nil
}

// destroyAll releases values, skipping the nil pointers the binding can
// leave in an interface when it fails half way.
func destroyAll(vs []ortgo.Value) {
	for _, v := range vs {
		if v != nil && !reflect.ValueOf(v).IsNil() {
			v.Destroy()
		}
	}
}

// toORT wraps a tensor's bytes for ORT without copying them.
func toORT(t *graph.Tensor) (ortgo.Value, error) {
	if t.DType == graph.String {
		return nil, fmt.Errorf("string tensors are %w", ErrNotExpressible)
	}
	data, err := t.Bytes()
	if err != nil {
		return nil, err
	}
	n, err := t.NumElements()
	if err != nil {
		return nil, err
	}
	if want, ok := t.DType.ByteSize(n); !ok || int64(len(data)) != want {
		return nil, fmt.Errorf("%d bytes for %s%v (want %d)", len(data), t.DType, t.Dims, want)
	}
	if len(t.Dims) == 0 {
		return scalar(t.DType, data)
	}
	if n == 0 {
		return emptyTensor(t.DType, ortgo.NewShape(t.Dims...))
	}
	return ortgo.NewCustomDataTensor(ortgo.NewShape(t.Dims...), data, ortgo.TensorElementDataType(t.DType))
}

// scalar builds a rank-0 value; the binding's byte-backed tensor cannot
// express rank 0.
func scalar(dt graph.DataType, b []byte) (ortgo.Value, error) {
	if e, ok := nativeElement(dt); ok {
		return e.scalar(b)
	}
	return nil, fmt.Errorf("scalar %s inputs are %w", dt, ErrNotExpressible)
}

func emptyTensor(dt graph.DataType, s ortgo.Shape) (ortgo.Value, error) {
	if e, ok := nativeElement(dt); ok {
		return e.empty(s)
	}
	return nil, fmt.Errorf("empty %s tensors are %w", dt, ErrNotExpressible)
}

// element is what this package does with values of one element type the
// binding has a Go type for. The binding makes each such type a different
// Go type, so every crossing (scalars and empty tensors in, tensors and
// scalars out) needs a case per type; nativeElements lists them once.
type element struct {
	dt graph.DataType
	// scalar builds a rank-0 value from the element's little-endian bytes.
	scalar func(b []byte) (ortgo.Value, error)
	// empty builds a tensor of shape s with no elements.
	empty func(s ortgo.Shape) (ortgo.Value, error)
	// read copies an output of this Go type into a tensor; ok is false
	// for an output of any other type.
	read func(name string, v ortgo.Value) (t *graph.Tensor, ok bool, err error)
}

// elementOf is the element of type dt, whose Go type in the binding is T
// and whose little-endian bytes decode reads.
func elementOf[T ortgo.TensorData](dt graph.DataType, decode func(b []byte) T) element {
	return element{
		dt:     dt,
		scalar: func(b []byte) (ortgo.Value, error) { return ortgo.NewScalar(decode(b)) },
		empty:  func(s ortgo.Shape) (ortgo.Value, error) { return ortgo.NewEmptyTensor[T](s) },
		read: func(name string, v ortgo.Value) (*graph.Tensor, bool, error) {
			switch t := v.(type) {
			case *ortgo.Tensor[T]:
				out, err := typed(name, dt, t)
				return out, true, err
			case *ortgo.Scalar[T]:
				out, err := scalarTensor(name, dt, t)
				return out, true, err
			}
			return nil, false, nil
		},
	}
}

var nativeElements = []element{
	elementOf(graph.Float, func(b []byte) float32 { return math.Float32frombits(binary.LittleEndian.Uint32(b)) }),
	elementOf(graph.Double, func(b []byte) float64 { return math.Float64frombits(binary.LittleEndian.Uint64(b)) }),
	elementOf(graph.Int8, func(b []byte) int8 { return int8(b[0]) }),
	elementOf(graph.Uint8, func(b []byte) uint8 { return b[0] }),
	elementOf(graph.Bool, func(b []byte) bool { return b[0] != 0 }),
	elementOf(graph.Int16, func(b []byte) int16 { return int16(binary.LittleEndian.Uint16(b)) }),
	elementOf(graph.Uint16, binary.LittleEndian.Uint16),
	elementOf(graph.Int32, func(b []byte) int32 { return int32(binary.LittleEndian.Uint32(b)) }),
	elementOf(graph.Uint32, binary.LittleEndian.Uint32),
	elementOf(graph.Int64, func(b []byte) int64 { return int64(binary.LittleEndian.Uint64(b)) }),
	elementOf(graph.Uint64, binary.LittleEndian.Uint64),
}

// nativeElement is dt's entry in nativeElements.
func nativeElement(dt graph.DataType) (element, bool) {
	for _, e := range nativeElements {
		if e.dt == dt {
			return e, true
		}
	}
	return element{}, false
}

// preallocate returns the value ORT should write output o into, or nil to
// let ORT allocate it. The binding cannot return rank-0 outputs, nor types
// it has no Go type for (float16, bfloat16, float8, int4), when ORT
// allocates them, so those are allocated here from the declared shape.
func preallocate(o IO) (ortgo.Value, error) {
	if o.Shape == nil {
		return nil, nil
	}
	if len(o.Shape) == 0 {
		if o.DType == graph.Float16 || o.DType == graph.BFloat16 {
			return ortgo.NewCustomDataTensor(ortgo.NewShape(1), make([]byte, 2), ortgo.TensorElementDataType(o.DType))
		}
		return scalar(o.DType, make([]byte, 8))
	}
	if nativeType(o.DType) {
		return nil, nil
	}
	n := int64(1)
	for _, d := range o.Shape {
		if d < 0 {
			return nil, fmt.Errorf("%s outputs need a static shape (the ORT binding cannot return them otherwise); declared %v: %w", o.DType, o.Shape, ErrNotExpressible)
		}
		n *= d
	}
	size, ok := o.DType.ByteSize(n)
	if !ok || size == 0 {
		return nil, nil
	}
	return ortgo.NewCustomDataTensor(ortgo.NewShape(o.Shape...), make([]byte, size), ortgo.TensorElementDataType(o.DType))
}

// nativeType reports whether the binding has a Go type for dt.
func nativeType(dt graph.DataType) bool {
	_, ok := nativeElement(dt)
	return ok || dt == graph.String
}

// fromORT copies an ORT output into a tensor.
func fromORT(name string, v ortgo.Value) (*graph.Tensor, error) {
	if t, ok := v.(*ortgo.CustomDataTensor); ok {
		dt := graph.DataType(t.DataType())
		shape := []int64(t.GetShape())
		data := append([]byte{}, t.GetData()...)
		if len(shape) == 1 && shape[0] == 1 && len(data) == 2 {
			shape = nil // a rank-0 float16 output, allocated as [1] by preallocate
		}
		out, err := graph.NewTensor(name, dt, shape, data)
		if err != nil {
			// onnxruntime_go v1.27.0 copies one byte per element for the
			// types it has no Go type for, so wider ones come back short.
			return nil, fmt.Errorf("%s outputs cannot be read through the ORT binding (it returns %d bytes for %v): %w", dt, len(data), shape, ErrNotExpressible)
		}
		return out, nil
	}
	for _, e := range nativeElements {
		if t, ok, err := e.read(name, v); ok {
			return t, err
		}
	}
	return nil, fmt.Errorf("outputs of this kind (%T) are %w", v, ErrNotExpressible)
}

func scalarTensor[T ortgo.TensorData](name string, dt graph.DataType, s *ortgo.Scalar[T]) (*graph.Tensor, error) {
	v := s.GetData()
	size := int(unsafe.Sizeof(v))
	b := make([]byte, size)
	copy(b, unsafe.Slice((*byte)(unsafe.Pointer(&v)), size))
	return graph.NewTensor(name, dt, nil, b)
}

// typed makes a tensor of an output the binding returned. It takes over
// the binding's data rather than copying it: onnxruntime_go v1.27.0 has
// already copied ORT's buffer into that Go slice (createTensorWithCData),
// and Destroy only lets go of it, so a third copy of every output (all of
// a model's activations in a calibration run) would be waste.
func typed[T ortgo.TensorData](name string, dt graph.DataType, t *ortgo.Tensor[T]) (*graph.Tensor, error) {
	data := t.GetData()
	var zero T
	size := len(data) * int(unsafe.Sizeof(zero))
	b := []byte{}
	if size > 0 {
		b = unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(data))), size)
	}
	return graph.NewTensor(name, dt, []int64(t.GetShape()), b)
}
