package benchsuite

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
)

// The memory rows and load+save come from the packages' own Go benchmarks,
// which already measure in child processes (a child's peak RSS is its
// own, not the suite's); the suite runs them with -count and reads one
// line per repeat.

// goBench runs one Go benchmark `count` times, one iteration each, and
// returns the metrics of each run (unit -> value), in order.
func (s *suite) goBench(pkg, bench string, count int, env ...string) ([]map[string]float64, error) {
	cmd := exec.Command("go", "test", "-run=^$", "-bench=^"+bench+"$", "-benchtime=1x",
		"-count="+strconv.Itoa(count), "-timeout=60m", pkg)
	cmd.Dir = s.opts.Root
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("go test -bench=%s %s: %v\n%s", bench, pkg, err, lastLines(out, 20))
	}
	runs, err := parseBenchOutput(out, bench)
	if err != nil {
		return nil, fmt.Errorf("go test -bench=%s %s: %w", bench, pkg, err)
	}
	if len(runs) != count {
		return nil, fmt.Errorf("go test -bench=%s %s: %d result lines, want %d\n%s", bench, pkg, len(runs), count, lastLines(out, 20))
	}
	return runs, nil
}

// parseBenchOutput reads the result lines of benchmark name from `go test
// -bench` output: "BenchmarkX-2  1  123 ns/op  4.5 unit ...".
func parseBenchOutput(out []byte, name string) ([]map[string]float64, error) {
	var runs []map[string]float64
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || (f[0] != name && !strings.HasPrefix(f[0], name+"-")) {
			continue
		}
		if len(f)%2 != 0 {
			return nil, fmt.Errorf("result line %q: want value-unit pairs", sc.Text())
		}
		m := map[string]float64{}
		for i := 2; i < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				return nil, fmt.Errorf("result line %q: %v", sc.Text(), err)
			}
			m[f[i+1]] = v
		}
		runs = append(runs, m)
	}
	return runs, sc.Err()
}

// column is one metric over the runs; a run without it is an error.
func column(runs []map[string]float64, unit string) ([]float64, error) {
	xs := make([]float64, len(runs))
	for i, r := range runs {
		v, ok := r[unit]
		if !ok {
			return nil, fmt.Errorf("benchmark run %d reports no %q", i+1, unit)
		}
		xs[i] = v
	}
	return xs, nil
}

// columns is column for each of units, in their order: the first unit
// the runs lack is the error.
func columns(runs []map[string]float64, units ...string) ([][]float64, error) {
	cols := make([][]float64, len(units))
	for i, unit := range units {
		xs, err := column(runs, unit)
		if err != nil {
			return nil, err
		}
		cols[i] = xs
	}
	return cols, nil
}

func lastLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// loadSave is graph's BenchmarkLoadSave: per repeat, load+save of a
// synthetic model in a child process, then a plain copy of the file with
// the same fsync in another.
func (s *suite) loadSave() error {
	mib := 512
	if s.opts.Quick {
		mib = 64
	}
	runs, err := s.goBench("./graph", "BenchmarkLoadSave", s.opts.Repeats, fmt.Sprintf("OPTC_BENCH_MB=%d", mib))
	if err != nil {
		return err
	}
	cols, err := columns(runs, "loadsave-MB/s", "copy-MB/s", "peak-RSS-MB", "RSS/model")
	if err != nil {
		return err
	}
	ls, cp, peak, perModel := cols[0], cols[1], cols[2], cols[3]
	size := make([]float64, len(peak))
	for i := range peak {
		size[i] = peak[i] / perModel[i]
	}
	speed := ratioRow("toolchain", fmt.Sprintf("load+save throughput / file copy (%d MiB model)", mib), "copy (fsync, rename)", "load+save", "MB/s", cp, ls)
	mem := ratioRow("memory", fmt.Sprintf("load+save peak RSS / model size (%d MiB model)", mib), "model size", "peak RSS", "MB", size, peak)
	mem.Note = "the child's VmHWM; mapped pages of the input file count"
	s.res.Ratios = append(s.res.Ratios, speed, mem)
	return nil
}

// calibrationMemory is calibrate's BenchmarkCalibrationMemory: per repeat,
// entropy calibration of MNIST on 200 and then on 2,000 samples, each in a
// fresh child process.
func (s *suite) calibrationMemory() error {
	runs, err := s.goBench("./calibrate", "BenchmarkCalibrationMemory", max(2, s.opts.Repeats-2))
	if err != nil {
		return err
	}
	cols, err := columns(runs, "peak-RSS-MB-200", "peak-RSS-MB-2000")
	if err != nil {
		return err
	}
	small, large := cols[0], cols[1]
	r := ratioRow("memory", "calibration peak RSS, 2,000 / 200 samples (MNIST, entropy)", "200 samples", "2,000 samples", "MiB", small, large)
	r.Note = "histograms, not activations, are kept: memory must not grow with the data"
	s.res.Ratios = append(s.res.Ratios, r)
	return nil
}
