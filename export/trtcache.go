package export

// The TensorRT legacy calibration cache: what TensorRT <= 10 reads for
// implicit INT8 quantization (trtexec --int8 --calib=FILE). TensorRT 10.1
// deprecated it in favour of Q/DQ models and 11 removed it; it is written
// for the engines that still build that way.
//
// The format, as TensorRT's calibrators write it (NVIDIA's sampleINT8
// README, "Calibration file"; caches quoted in NVIDIA/TensorRT#625 and
// ultralytics/ultralytics#14121): a header line
// "TRT-<version>-<calibrator>" (version as NV_TENSORRT_VERSION prints it,
// e.g. 8601 for 8.6.1, 100300 for 10.3.0; calibrator e.g.
// EntropyCalibration2 or MinMaxCalibration), then one "name: hex" line
// per tensor, hex being the IEEE-754 float32 bits, big-endian, of the
// scale amax/127 (a [0, 1] input gives 1/127: 3c010a14).

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
)

// TRTCalibrator is the calibrator named in the header WriteTRTCalibCache
// writes: TensorRT takes a cache only from a calibrator of the same kind,
// and EntropyCalibration2 is the one trtexec and the samples use.
const TRTCalibrator = "EntropyCalibration2"

// WriteTRTCalibCache writes a legacy calibration cache for TensorRT
// trtVersion (digits, as NV_TENSORRT_VERSION: "8601", "100300") from each
// tensor's amax (largest |x|), sorted by name so that the same ranges give
// the same bytes.
func WriteTRTCalibCache(w io.Writer, trtVersion string, amax map[string]float64) error {
	if trtVersion == "" || strings.Trim(trtVersion, "0123456789") != "" {
		return fmt.Errorf("TensorRT calibration cache: version %q is not digits (like 8601 for 8.6.1 or 100300 for 10.3.0)", trtVersion)
	}
	names := make([]string, 0, len(amax))
	for name, a := range amax {
		switch {
		case name == "" || strings.ContainsAny(name, "\r\n"):
			return fmt.Errorf("TensorRT calibration cache: tensor name %q cannot be written on one line", name)
		case math.IsNaN(a) || math.IsInf(a, 0) || a < 0:
			return fmt.Errorf("TensorRT calibration cache: tensor %q: amax %v is not a finite |x| >= 0", name, a)
		case a/127 > math.MaxFloat32:
			return fmt.Errorf("TensorRT calibration cache: tensor %q: amax %v overflows a float32 scale", name, a)
		}
		names = append(names, name)
	}
	slices.Sort(names)
	var b strings.Builder
	fmt.Fprintf(&b, "TRT-%s-%s\n", trtVersion, TRTCalibrator)
	for _, name := range names {
		fmt.Fprintf(&b, "%s: %08x\n", name, math.Float32bits(float32(amax[name]/127)))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// ReadTRTCalibCache parses a legacy calibration cache, whichever tool or
// calibrator wrote it, and returns the TensorRT version of its header and
// each tensor's amax (scale*127). The last line may lack its newline;
// CRLF line ends are accepted.
func ReadTRTCalibCache(r io.Reader) (version string, amax map[string]float64, err error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 16*1024*1024)
	line := 0
	next := func() (string, bool) {
		if !sc.Scan() {
			return "", false
		}
		line++
		return strings.TrimSuffix(sc.Text(), "\r"), true
	}
	header, ok := next()
	if !ok {
		if err := sc.Err(); err != nil {
			return "", nil, fmt.Errorf("TensorRT calibration cache: %w", err)
		}
		return "", nil, errors.New("TensorRT calibration cache: empty, want a TRT-<version>-<calibrator> header")
	}
	if version, err = parseTRTCacheHeader(header); err != nil {
		return "", nil, err
	}
	amax = map[string]float64{}
	for {
		text, ok := next()
		if !ok {
			break
		}
		if text == "" {
			continue
		}
		name, scale, err := parseTRTCacheLine(text)
		if err != nil {
			return "", nil, fmt.Errorf("TensorRT calibration cache line %d %q: %w", line, clip(text), err)
		}
		if _, dup := amax[name]; dup {
			return "", nil, fmt.Errorf("TensorRT calibration cache line %d: tensor %q is listed twice", line, name)
		}
		amax[name] = float64(scale) * 127
	}
	if err := sc.Err(); err != nil {
		return "", nil, fmt.Errorf("TensorRT calibration cache after line %d: %w", line, err)
	}
	return version, amax, nil
}

func parseTRTCacheHeader(h string) (string, error) {
	rest, ok := strings.CutPrefix(h, "TRT-")
	version, calibrator, ok2 := strings.Cut(rest, "-")
	if !ok || !ok2 || version == "" || calibrator == "" || strings.ContainsAny(h, " \t") {
		return "", fmt.Errorf("TensorRT calibration cache line 1 %q: want a TRT-<version>-<calibrator> header", clip(h))
	}
	return version, nil
}

// parseTRTCacheLine splits "name: hex" at the last ": ", since TensorRT's
// own names ("(Unnamed Layer* 3) [Shuffle]_output") contain spaces.
func parseTRTCacheLine(s string) (string, float32, error) {
	i := strings.LastIndex(s, ": ")
	if i <= 0 {
		return "", 0, errors.New(`want "name: hex"`)
	}
	name, hex := s[:i], s[i+2:]
	if strings.Contains(name, "\r") {
		return "", 0, errors.New("the tensor name holds a carriage return")
	}
	if len(hex) == 0 || len(hex) > 8 {
		return "", 0, fmt.Errorf("scale %q is not up to 8 hex digits", hex)
	}
	bits, err := strconv.ParseUint(hex, 16, 32)
	if err != nil {
		return "", 0, fmt.Errorf("scale %q is not up to 8 hex digits", hex)
	}
	scale := math.Float32frombits(uint32(bits))
	if math.IsNaN(float64(scale)) || math.IsInf(float64(scale), 0) || scale < 0 {
		return "", 0, fmt.Errorf("scale %s is %v, not a finite value >= 0", hex, scale)
	}
	return name, scale, nil
}

// clip shortens a line quoted in an error.
func clip(s string) string {
	if len(s) > 80 {
		return s[:77] + "..."
	}
	return s
}
