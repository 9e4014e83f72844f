package export

// build_engine.sh: the script that turns an exported ONNX artifact into a
// TensorRT engine with trtexec on the deployment machine, choosing the
// precision flags by the TensorRT version it finds there.
//
// Flags, by the documentation they come from:
//   - TensorRT 11 removes every precision flag (--fp16, --int8, --calib)
//     and is strongly typed: precision comes from the model's own types and
//     Q/DQ nodes ("Migrating trtexec Usage from TensorRT 10.x to 11.x").
//     --stronglyTyped is accepted there as a no-op and required on 10.x to
//     opt in, so the script passes it on 11 and later.
//   - TensorRT 10 (weak typing, deprecated in 10.12): a Q/DQ model builds
//     only with --int8, else "Int8 precision has been set for a layer or
//     layer output, but int8 is not configured in the builder"
//     (NVIDIA/TensorRT#4021, microsoft/onnxruntime#13381); --fp16 lets the
//     layers left float run in FP16 instead of FP32. An fp16 artifact
//     builds with --fp16. The legacy calibration cache is
//     --int8 --calib=FILE (IInt8Calibrator, deprecated in 10.1, removed in
//     11).
//   - The version: trtexec's banner "[TensorRT v100300]" is
//     NV_TENSORRT_VERSION, major*10000+minor*100+patch since 10, and
//     major*1000+minor*100+patch before (v8601).

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// EnginePrecision is what kind of artifact the script builds.
type EnginePrecision string

// The precisions EngineScript knows.
const (
	// EngineQDQ: an explicitly quantized model (QuantizeLinear/
	// DequantizeLinear nodes).
	EngineQDQ EnginePrecision = "qdq"
	// EngineFP16: a model whose tensors are already float16.
	EngineFP16 EnginePrecision = "fp16"
	// EngineCalibCache: a float model with a legacy calibration cache
	// (TensorRT <= 10 only).
	EngineCalibCache EnginePrecision = "calib-cache"
)

// ShapeRange is one dynamic input's optimization profile.
type ShapeRange struct {
	Min, Opt, Max []int64
}

// EngineScriptOptions say what build_engine.sh builds. Paths are as the
// script sees them: relative ones are taken from the script's own folder,
// so the artifact folder can be moved as a whole.
type EngineScriptOptions struct {
	Model       string // the ONNX file
	Engine      string // the engine to write
	Precision   EnginePrecision
	CalibCache  string // the legacy cache, for EngineCalibCache
	TimingCache string // optional: trtexec's timing cache, reused across builds
	// Shapes gives each dynamic input's min/opt/max dims; inputs with
	// static shapes need none.
	Shapes map[string]ShapeRange
}

// EngineScript returns a POSIX sh script that runs trtexec to build
// opts.Engine from opts.Model. It reads the TensorRT major version from
// trtexec's banner (or $TRT_MAJOR), runs $TRTEXEC when set, and passes its
// own arguments on to trtexec. The same options give the same bytes.
func EngineScript(opts EngineScriptOptions) ([]byte, error) {
	if opts.Model == "" || opts.Engine == "" {
		return nil, errors.New("build_engine.sh: the model and engine paths are required")
	}
	for _, p := range []string{opts.Model, opts.Engine, opts.CalibCache, opts.TimingCache} {
		if strings.ContainsAny(p, "\x00\n\r") {
			return nil, fmt.Errorf("build_engine.sh: path %q holds a control character", p)
		}
	}
	switch opts.Precision {
	case EngineQDQ, EngineFP16:
		if opts.CalibCache != "" {
			return nil, fmt.Errorf("build_engine.sh: a calibration cache is only for precision %q, not %q", EngineCalibCache, opts.Precision)
		}
	case EngineCalibCache:
		if opts.CalibCache == "" {
			return nil, fmt.Errorf("build_engine.sh: precision %q needs the calibration cache path", EngineCalibCache)
		}
	default:
		return nil, fmt.Errorf("build_engine.sh: unknown precision %q (want %q, %q or %q)", opts.Precision, EngineQDQ, EngineFP16, EngineCalibCache)
	}
	args := []string{"--onnx=" + opts.Model, "--saveEngine=" + opts.Engine}
	if opts.TimingCache != "" {
		args = append(args, "--timingCacheFile="+opts.TimingCache)
	}
	shapes, err := shapeFlags(opts.Shapes)
	if err != nil {
		return nil, err
	}
	args = append(args, shapes...)

	var b bytes.Buffer
	b.WriteString(`#!/bin/sh
# build_engine.sh, written by optc: builds a TensorRT engine with trtexec.
#   ./build_engine.sh [more trtexec flags...]
# TRTEXEC   the trtexec to run (default: trtexec on PATH)
# TRT_MAJOR the TensorRT major version (default: read from trtexec's banner)
set -eu
cd "$(dirname "$0")"
trtexec=${TRTEXEC:-trtexec}
if [ -z "${TRT_MAJOR:-}" ]; then
	# "[TensorRT v100300]" is 10.3.0, "[TensorRT v8601]" is 8.6.1.
	v=$("$trtexec" --version 2>&1 | sed -n 's/.*\[TensorRT v\([0-9][0-9]*\)\].*/\1/p' | head -n 1) || v=
	if [ -z "$v" ]; then
		echo "build_engine.sh: cannot read the TensorRT version from '$trtexec --version'; set TRT_MAJOR" >&2
		exit 1
	fi
	if [ "${#v}" -ge 6 ]; then TRT_MAJOR=$((v / 10000)); else TRT_MAJOR=$((v / 1000)); fi
fi
case $TRT_MAJOR in
'' | *[!0-9]*)
	echo "build_engine.sh: TRT_MAJOR=$TRT_MAJOR is not a number" >&2
	exit 2
	;;
esac
`)
	fmt.Fprintf(&b, "# Precision flags for a %s artifact.\n", opts.Precision)
	b.WriteString("if [ \"$TRT_MAJOR\" -ge 11 ]; then\n")
	switch opts.Precision {
	case EngineCalibCache:
		b.WriteString("\techo \"build_engine.sh: TensorRT $TRT_MAJOR removed implicit INT8 calibration (--int8 --calib); build the Q/DQ model instead\" >&2\n\texit 1\n")
	default:
		b.WriteString("\tset -- --stronglyTyped \"$@\"\n")
	}
	b.WriteString("else\n")
	switch opts.Precision {
	case EngineQDQ:
		b.WriteString("\tset -- --int8 --fp16 \"$@\"\n")
	case EngineFP16:
		b.WriteString("\tset -- --fp16 \"$@\"\n")
	case EngineCalibCache:
		fmt.Fprintf(&b, "\tset -- --int8 %s \"$@\"\n", shellQuote("--calib="+opts.CalibCache))
	}
	b.WriteString("fi\nexec \"$trtexec\"")
	for _, a := range args {
		b.WriteString(" \\\n\t" + shellQuote(a))
	}
	b.WriteString(" \\\n\t\"$@\"\n")
	return b.Bytes(), nil
}

// shapeFlags returns --minShapes/--optShapes/--maxShapes for the dynamic
// inputs, sorted by name: "name:1x3x48x192,other:...". A name holding ':'
// is wrapped in single quotes, as trtexec's help asks.
func shapeFlags(shapes map[string]ShapeRange) ([]string, error) {
	if len(shapes) == 0 {
		return nil, nil
	}
	names := make([]string, 0, len(shapes))
	for name := range shapes {
		names = append(names, name)
	}
	slices.Sort(names)
	var spec [3][]string
	for _, name := range names {
		r := shapes[name]
		if name == "" || strings.ContainsAny(name, ",'\x00\n\r") {
			return nil, fmt.Errorf("build_engine.sh: input %q: trtexec cannot name an input holding a comma or quote", name)
		}
		if len(r.Min) == 0 || len(r.Min) != len(r.Opt) || len(r.Opt) != len(r.Max) {
			return nil, fmt.Errorf("build_engine.sh: input %q: min %v, opt %v, max %v need the same rank, at least 1", name, r.Min, r.Opt, r.Max)
		}
		for i := range r.Min {
			if r.Min[i] < 0 || r.Min[i] > r.Opt[i] || r.Opt[i] > r.Max[i] {
				return nil, fmt.Errorf("build_engine.sh: input %q dim %d: want 0 <= min <= opt <= max, got %d, %d, %d", name, i, r.Min[i], r.Opt[i], r.Max[i])
			}
		}
		quoted := name
		if strings.Contains(name, ":") {
			quoted = "'" + name + "'"
		}
		for k, dims := range [3][]int64{r.Min, r.Opt, r.Max} {
			spec[k] = append(spec[k], quoted+":"+joinDims(dims))
		}
	}
	return []string{
		"--minShapes=" + strings.Join(spec[0], ","),
		"--optShapes=" + strings.Join(spec[1], ","),
		"--maxShapes=" + strings.Join(spec[2], ","),
	}, nil
}

func joinDims(dims []int64) string {
	s := make([]string, len(dims))
	for i, d := range dims {
		s[i] = strconv.FormatInt(d, 10)
	}
	return strings.Join(s, "x")
}

// shellQuote quotes s for sh: inside single quotes nothing is special but
// the quote itself.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
