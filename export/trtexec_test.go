package export

import (
	"strings"
	"testing"
)

// trtexecTRT85 is the end of a trtexec run on TensorRT 8.5 with the default
// --percentile=90,95,99, as quoted by an NVIDIA engineer in
// https://github.com/NVIDIA/TensorRT/issues/2124 (the line after GPU
// Compute Time is cut there, so it ends with it).
const trtexecTRT85 = `[08/18/2022-23:32:35] [I] === Performance summary ===
[08/18/2022-23:32:35] [I] Throughput: 118.63 qps
[08/18/2022-23:32:35] [I] Latency: min = 8.68604 ms, max = 8.86206 ms, mean = 8.70558 ms, median = 8.70435 ms, percentile(90%) = 8.71228 ms, percentile(95%) = 8.71619 ms, percentile(99%) = 8.72046 ms
[08/18/2022-23:32:35] [I] Enqueue Time: min = 8.23904 ms, max = 8.40942 ms, mean = 8.25222 ms, median = 8.25098 ms, percentile(90%) = 8.25928 ms, percentile(95%) = 8.26166 ms, percentile(99%) = 8.26709 ms
[08/18/2022-23:32:35] [I] H2D Latency: min = 0.180298 ms, max = 0.191162 ms, mean = 0.182987 ms, median = 0.183105 ms, percentile(90%) = 0.184326 ms, percentile(95%) = 0.184814 ms, percentile(99%) = 0.186035 ms
[08/18/2022-23:32:35] [I] GPU Compute Time: min = 8.13654 ms, max = 8.30908 ms, mean = 8.15172 ms, median = 8.15057 ms, percentile(90%) = 8.15894 ms, percentile(95%) = 8.16144 ms, percentile(99%) = 8.16742 ms
`

// trtexecTRT84 is a TensorRT 8.4 run (only percentile(99%), warnings and
// the verbose explanations after the summary), from
// https://github.com/WongKinYiu/yolov7/pull/329. Its last line is added
// here, the start of trtexec's explanation of Throughput, which must not
// be read as the summary's.
const trtexecTRT84 = `[07/28/2022-16:01:51] [I] === Performance summary ===
[07/28/2022-16:01:51] [I] Throughput: 35.8421 qps
[07/28/2022-16:01:51] [I] Latency: min = 27.3459 ms, max = 29.6284 ms, mean = 27.8981 ms, median = 27.7662 ms, percentile(99%) = 29.568 ms
[07/28/2022-16:01:51] [I] Enqueue Time: min = 0.0256348 ms, max = 0.164413 ms, mean = 0.106011 ms, median = 0.110474 ms, percentile(99%) = 0.153809 ms
[07/28/2022-16:01:51] [I] H2D Latency: min = 0 ms, max = 0 ms, mean = 0 ms, median = 0 ms, percentile(99%) = 0 ms
[07/28/2022-16:01:51] [I] GPU Compute Time: min = 27.3459 ms, max = 29.6284 ms, mean = 27.8981 ms, median = 27.7662 ms, percentile(99%) = 29.568 ms
[07/28/2022-16:01:51] [I] D2H Latency: min = 0 ms, max = 0 ms, mean = 0 ms, median = 0 ms, percentile(99%) = 0 ms
[07/28/2022-16:01:51] [I] Total Host Walltime: 3.06901 s
[07/28/2022-16:01:51] [I] Total GPU Compute Time: 3.06879 s
[07/28/2022-16:01:51] [W] * GPU compute time is unstable, with coefficient of variance = 1.55253%.
[07/28/2022-16:01:51] [W]   If not already in use, locking GPU clock frequency or adding --useSpinWait may improve the stability.
[07/28/2022-16:01:51] [I] Explanations of the performance metrics are printed in the verbose logs.
[07/28/2022-16:01:51] [V] 
[07/28/2022-16:01:51] [V] === Explanations of the performance metrics ===
[07/28/2022-16:01:51] [V] Throughput: the observed throughput computed by dividing the number of queries by the Total Host Walltime.
`

func TestParseTrtexecReport(t *testing.T) {
	r, err := ParseTrtexecReport(strings.NewReader("&&&& RUNNING TensorRT.trtexec [TensorRT v8500] # trtexec --onnx=m.onnx\n" + trtexecTRT85))
	if err != nil {
		t.Fatal(err)
	}
	p90, ok90 := r.Latency.P(90)
	p99, ok99 := r.GPUCompute.P(99)
	if r.TensorRTVersion != "8.5.0" || r.ThroughputQPS != 118.63 || r.Latency.Min != 8.68604 || r.Latency.Mean != 8.70558 ||
		r.Latency.Median != 8.70435 || !ok90 || p90 != 8.71228 || len(r.Latency.Percentiles) != 3 ||
		r.GPUCompute.Median != 8.15057 || !ok99 || p99 != 8.16742 || r.H2D == nil || r.H2D.Max != 0.191162 || r.D2H != nil {
		t.Errorf("parsed %+v", r)
	}
	r, err = ParseTrtexecReport(strings.NewReader(trtexecTRT84))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := r.Latency.P(90); ok || r.TensorRTVersion != "" || r.ThroughputQPS != 35.8421 || r.Latency.Max != 29.6284 || r.D2H == nil {
		t.Errorf("parsed %+v", r)
	}
	if p, _ := r.Latency.P(99); p != 29.568 {
		t.Errorf("p99 %v", p)
	}
}

func TestBannerVersion(t *testing.T) {
	for banner, want := range map[string]string{
		"&&&& RUNNING TensorRT.trtexec [TensorRT v100300] [b17] # trtexec": "10.3.0",
		"&&&& PASSED TensorRT.trtexec [TensorRT v8601] # trtexec":          "8.6.1",
		"&&&& RUNNING TensorRT.trtexec [TensorRT v101600] [b72]":           "10.16.0",
		"[I] TensorRT version: 10.3.0":                                     "",
	} {
		if got := bannerVersion(banner); got != want {
			t.Errorf("%q: %q, want %q", banner, got, want)
		}
	}
}

func TestParseTrtexecReportMalformed(t *testing.T) {
	summary := "[I] === Performance summary ===\n"
	good := "[I] Throughput: 10 qps\n[I] Latency: min = 1 ms, max = 2 ms, mean = 1.5 ms, median = 1.5 ms\n[I] GPU Compute Time: min = 1 ms, max = 2 ms, mean = 1.5 ms, median = 1.5 ms\n"
	if _, err := ParseTrtexecReport(strings.NewReader(summary + good)); err != nil {
		t.Fatalf("the well-formed control fails: %v", err)
	}
	for _, c := range []struct{ name, text, want string }{
		{"no summary", good, "no \"=== Performance summary ===\""},
		{"no GPU line", summary + "[I] Throughput: 10 qps\n[I] Latency: min = 1 ms, max = 2 ms, mean = 1.5 ms, median = 1.5 ms\n", "lacks"},
		{"bad throughput", summary + strings.Replace(good, "10 qps", "ten qps", 1), "line 2"},
		{"no unit", summary + strings.Replace(good, "max = 2 ms,", "max = 2,", 1), "line 3"},
		{"missing median", summary + strings.Replace(good, ", median = 1.5 ms\n[I] GPU", "\n[I] GPU", 1), "no median"},
		{"bad percentile", summary + strings.Replace(good, "median = 1.5 ms\n[I] GPU", "median = 1.5 ms, percentile(x%) = 3 ms\n[I] GPU", 1), "percentile(x%)"},
		{"negative", summary + strings.Replace(good, "min = 1 ms", "min = -1 ms", 1), ">= 0"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseTrtexecReport(strings.NewReader(c.text))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want one mentioning %q", err, c.want)
			}
		})
	}
}
