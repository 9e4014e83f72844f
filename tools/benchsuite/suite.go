// Package benchsuite is optc's benchmark suite (`make bench`, `make
// bench-quick`): every figure is a ratio of two things measured side by
// side in the same run, alternating A and B (ABAB...) and repeated, so that
// a noisy second on a shared machine hurts both sides alike. It reports the
// median ratio and its spread (min-max) over the repeats; absolute times
// drift between runs and machines, ratios much less.
package benchsuite

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/optc-dev/optc/ort"
)

// Options say how much to measure.
type Options struct {
	// Quick is the subset for CI and quick checks: MNIST and cls only, a
	// small load+save model, fewer repeats, shorter timing windows.
	Quick bool
	// Repeats of every A/B pair (0: 3 quick, 5 full).
	Repeats int
	// Root is the optc source tree (the Go benchmarks run there, and the
	// bundled models and configs are found there).
	Root string
	// Work is a scratch folder for the artifacts under test.
	Work string
	// Only, when set, runs just the sections whose name contains it.
	Only string
	// Models, when set, keeps the zoo section to these models (by name).
	Models []string
	// Progress gets one line per measurement (nil: silent).
	Progress io.Writer
}

// Results is the machine-readable outcome (results.json).
type Results struct {
	Quick   bool      `json:"quick"`
	Repeats int       `json:"repeats"`
	Machine Machine   `json:"machine"`
	Started time.Time `json:"started"`
	Seconds float64   `json:"seconds"`
	// Ratios are the toolchain and memory rows.
	Ratios []Row `json:"ratios"`
	// Models are the model speed rows, each with its accuracy cost.
	Models []ModelRow `json:"models"`
	// Errors are the sections that failed (the rest still ran).
	Errors []string `json:"errors,omitempty"`
}

// Machine is where the figures were measured.
type Machine struct {
	CPU        string   `json:"cpu"`
	Cores      int      `json:"cores"`
	Features   []string `json:"cpu_features"` // the ones that matter to ORT's kernels
	GoVersion  string   `json:"go_version"`
	ORTVersion string   `json:"ort_version"`
}

// Row is one side-by-side ratio: B over A, per repeat.
type Row struct {
	Section string  `json:"section"` // toolchain or memory
	Name    string  `json:"name"`
	A       string  `json:"a"`
	B       string  `json:"b"`
	Unit    string  `json:"unit"` // of AMedian and BMedian
	AMedian float64 `json:"a_median"`
	BMedian float64 `json:"b_median"`
	Ratio   Spread  `json:"ratio"` // B/A
	Note    string  `json:"note,omitempty"`
}

// Spread is the median and range of repeated values.
type Spread struct {
	N      int     `json:"n"`
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
}

// spreadOf summarizes xs (the median of an even count is the mean of the
// middle two).
func spreadOf(xs []float64) Spread {
	if len(xs) == 0 {
		return Spread{}
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	m := s[len(s)/2]
	if len(s)%2 == 0 {
		m = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return Spread{N: len(s), Median: m, Min: s[0], Max: s[len(s)-1]}
}

// ratioRow builds a row from paired measurements a[i], b[i] of one repeat each.
func ratioRow(section, name, aName, bName, unit string, a, b []float64) Row {
	r := make([]float64, len(a))
	for i := range a {
		r[i] = b[i] / a[i]
	}
	return Row{Section: section, Name: name, A: aName, B: bName, Unit: unit,
		AMedian: spreadOf(a).Median, BMedian: spreadOf(b).Median, Ratio: spreadOf(r)}
}

// Run measures every section; a section that fails is recorded in Errors
// and the others still run.
func Run(opts Options) (*Results, error) {
	if opts.Repeats <= 0 {
		opts.Repeats = 5
		if opts.Quick {
			opts.Repeats = 3
		}
	}
	if _, err := ort.Init(""); err != nil {
		return nil, err
	}
	s := &suite{opts: opts, res: &Results{Quick: opts.Quick, Repeats: opts.Repeats, Machine: machine(), Started: time.Now().UTC()}}
	sections := []struct {
		name string
		run  func() error
	}{
		{"build --int8 vs floor", s.buildVsFloor},
		{"pass pipeline scaling", s.passScaling},
		{"load+save vs copy", s.loadSave},
		{"calibration memory", s.calibrationMemory},
		{"model speed", s.modelSpeed},
		{"zoo int8", s.zooInt8},
		{"ocr task", s.ocrTask},
	}
	for _, sec := range sections {
		if !strings.Contains(sec.name, opts.Only) {
			continue
		}
		s.progress("== %s", sec.name)
		if err := sec.run(); err != nil {
			s.res.Errors = append(s.res.Errors, fmt.Sprintf("%s: %v", sec.name, err))
			s.progress("%s failed: %v", sec.name, err)
		}
	}
	s.res.Seconds = time.Since(s.res.Started).Seconds()
	return s.res, nil
}

type suite struct {
	opts Options
	res  *Results
}

func (s *suite) progress(format string, args ...any) {
	if s.opts.Progress != nil {
		fmt.Fprintf(s.opts.Progress, "bench: "+format+"\n", args...)
	}
}

// machine describes this machine from /proc/cpuinfo.
func machine() Machine {
	m := Machine{Cores: runtime.NumCPU(), GoVersion: runtime.Version()}
	m.ORTVersion, _ = ort.Version()
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return m
	}
	var flags []string
	for line := range strings.Lines(string(b)) {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		switch strings.TrimSpace(k) {
		case "model name":
			if m.CPU == "" {
				m.CPU = strings.TrimSpace(v)
			}
		case "flags":
			if flags == nil {
				flags = strings.Fields(v)
			}
		}
	}
	for _, f := range []string{"avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512_vnni", "avx_vnni", "avx512_bf16", "amx_int8"} {
		if slices.Contains(flags, f) {
			m.Features = append(m.Features, f)
		}
	}
	return m
}

// selected says whether the zoo section measures the model named.
func (s *suite) selected(name string) bool {
	return len(s.opts.Models) == 0 || slices.Contains(s.opts.Models, name)
}
