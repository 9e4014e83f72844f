package export

// Reading trtexec's performance summary, the block its sampleReporting
// prints after a timed run:
//
//	[08/18/2022-23:32:35] [I] === Performance summary ===
//	[08/18/2022-23:32:35] [I] Throughput: 118.63 qps
//	[08/18/2022-23:32:35] [I] Latency: min = 8.68604 ms, max = 8.86206 ms, mean = 8.70558 ms, median = 8.70435 ms, percentile(90%) = 8.71228 ms, percentile(95%) = 8.71619 ms, percentile(99%) = 8.72046 ms
//	[08/18/2022-23:32:35] [I] GPU Compute Time: min = ..., percentile(99%) = 8.16742 ms
//
// Latency is host-measured H2D + GPU compute + D2H; GPU Compute Time is
// the figure NVIDIA asks to compare engines by. The percentiles are those
// of --percentile (90,95,99 by default since TensorRT 8.4; 99 before).

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// TrtexecReport is trtexec's performance summary. Times are milliseconds.
type TrtexecReport struct {
	// TensorRTVersion is from the "[TensorRT v100300]" banner ("10.3.0"),
	// "" when the output has none.
	TensorRTVersion string        `json:"tensorrt_version,omitempty"`
	ThroughputQPS   float64       `json:"throughput_qps"`
	Latency         TrtexecTiming `json:"latency_ms"`
	GPUCompute      TrtexecTiming `json:"gpu_compute_ms"`
	// H2D and D2H are the copies (nil when the summary has no such line).
	H2D *TrtexecTiming `json:"h2d_ms,omitempty"`
	D2H *TrtexecTiming `json:"d2h_ms,omitempty"`
}

// TrtexecTiming is one line of the summary.
type TrtexecTiming struct {
	Min         float64      `json:"min"`
	Max         float64      `json:"max"`
	Mean        float64      `json:"mean"`
	Median      float64      `json:"median"`
	Percentiles []Percentile `json:"percentiles"` // in the order printed
}

// Percentile is one "percentile(P%) = V ms" of a summary line.
type Percentile struct {
	Percent float64 `json:"percent"`
	Value   float64 `json:"value"`
}

// P returns the value at percent p, false when the run did not report it.
func (t TrtexecTiming) P(p float64) (float64, bool) {
	for _, x := range t.Percentiles {
		if x.Percent == p {
			return x.Value, true
		}
	}
	return 0, false
}

// ParseTrtexecReport reads trtexec's output (the whole log is fine) and
// returns its performance summary. It is an error when the summary, its
// throughput, latency or GPU compute line is missing, or when one of its
// lines does not parse (the error names the line).
func ParseTrtexecReport(r io.Reader) (*TrtexecReport, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 16*1024*1024)
	rep := &TrtexecReport{}
	var inSummary, haveThroughput, haveLatency, haveGPU bool
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSuffix(sc.Text(), "\r")
		if rep.TensorRTVersion == "" {
			rep.TensorRTVersion = bannerVersion(text)
		}
		msg := logMessage(text)
		if msg == "=== Performance summary ===" {
			inSummary = true
			continue
		}
		if !inSummary {
			continue
		}
		if strings.HasPrefix(msg, "===") {
			break // the next section (verbose explanations)
		}
		label, value, ok := strings.Cut(msg, ":")
		if !ok {
			continue
		}
		var err error
		switch label {
		case "Throughput":
			rep.ThroughputQPS, err = parseThroughput(value)
			haveThroughput = true
		case "Latency":
			rep.Latency, err = parseTiming(value)
			haveLatency = true
		case "GPU Compute Time":
			rep.GPUCompute, err = parseTiming(value)
			haveGPU = true
		case "H2D Latency":
			rep.H2D = &TrtexecTiming{}
			*rep.H2D, err = parseTiming(value)
		case "D2H Latency":
			rep.D2H = &TrtexecTiming{}
			*rep.D2H, err = parseTiming(value)
		}
		if err != nil {
			return nil, fmt.Errorf("trtexec output line %d %q: %w", line, clip(msg), err)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("trtexec output: %w", err)
	}
	switch {
	case !inSummary:
		return nil, errors.New("trtexec output: no \"=== Performance summary ===\" (did the run reach inference? --skipInference prints none)")
	case !haveThroughput || !haveLatency || !haveGPU:
		return nil, errors.New("trtexec output: the performance summary lacks its Throughput, Latency or GPU Compute Time line")
	}
	return rep, nil
}

// logMessage strips trtexec's "[date-time] [I] " prefixes from a line.
func logMessage(s string) string {
	s = strings.TrimSpace(s)
	for strings.HasPrefix(s, "[") {
		end := strings.Index(s, "]")
		if end < 0 {
			break
		}
		s = strings.TrimSpace(s[end+1:])
	}
	return s
}

// bannerVersion returns "10.3.0" from a line holding "[TensorRT v100300]"
// (or "8.6.1" from "v8601"), else "".
func bannerVersion(s string) string {
	_, rest, ok := strings.Cut(s, "[TensorRT v")
	if !ok {
		return ""
	}
	digits, _, ok := strings.Cut(rest, "]")
	n, err := strconv.Atoi(digits)
	if !ok || err != nil || n < 0 {
		return ""
	}
	major := 1000
	if len(digits) >= 6 {
		major = 10000
	}
	return fmt.Sprintf("%d.%d.%d", n/major, n%major/100, n%100)
}

func parseThroughput(s string) (float64, error) {
	num, ok := strings.CutSuffix(strings.TrimSpace(s), " qps")
	if !ok {
		return 0, errors.New(`want "N qps"`)
	}
	return parseMs(num)
}

// parseTiming reads "min = 1 ms, max = 2 ms, mean = ..., median = ...,
// percentile(99%) = 3 ms".
func parseTiming(s string) (TrtexecTiming, error) {
	var t TrtexecTiming
	seen := map[string]bool{}
	for _, field := range strings.Split(s, ",") {
		key, val, ok := strings.Cut(field, "=")
		if !ok {
			return t, fmt.Errorf("field %q is not key = value", strings.TrimSpace(field))
		}
		key = strings.TrimSpace(key)
		num, ok := strings.CutSuffix(strings.TrimSpace(val), " ms")
		if !ok {
			return t, fmt.Errorf("%s = %q is not in ms", key, strings.TrimSpace(val))
		}
		v, err := parseMs(num)
		if err != nil {
			return t, fmt.Errorf("%s: %w", key, err)
		}
		seen[key] = true
		switch key {
		case "min":
			t.Min = v
		case "max":
			t.Max = v
		case "mean":
			t.Mean = v
		case "median":
			t.Median = v
		default:
			pct, ok := strings.CutPrefix(key, "percentile(")
			pct, ok2 := strings.CutSuffix(pct, "%)")
			p, err := strconv.ParseFloat(pct, 64)
			if !ok || !ok2 || err != nil {
				return t, fmt.Errorf("unknown field %q", key)
			}
			t.Percentiles = append(t.Percentiles, Percentile{Percent: p, Value: v})
		}
	}
	for _, k := range []string{"min", "max", "mean", "median"} {
		if !seen[k] {
			return t, fmt.Errorf("no %s", k)
		}
	}
	return t, nil
}

// parseMs parses a number trtexec printed (like 1.29477e+08), refusing
// NaN, infinities and negatives.
func parseMs(s string) (float64, error) {
	v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
		return 0, fmt.Errorf("%q is not a finite number >= 0", strings.TrimSpace(s))
	}
	return v, nil
}
