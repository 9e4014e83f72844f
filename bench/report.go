package bench

import "github.com/optc-dev/optc/report"

// Report is the report of `optc bench --report DIR`: one model, its
// latency at each batch size (a single run: no interval for optc diff).
func (r *Result) Report() (*report.Report, error) {
	m := &report.Model{Name: r.Model, Role: "input", Latency: r.Timing()}
	if err := m.ReadGraph(r.Model); err != nil {
		return nil, err
	}
	return &report.Report{Schema: report.Schema, Kind: "bench", Input: r.Model, Models: []*report.Model{m}, Details: r,
		Environment: MeasuredOn().Report(r.IntraOpThreads, r.Level)}, nil
}

// Report is the machine as report.json describes it, with the ORT
// settings the figures were taken at.
func (e Environment) Report(threads int, level string) report.Environment {
	return report.Environment{OS: e.OS, Arch: e.Arch, CPU: e.CPU, CPUFeatures: e.CPUFlags, Cores: e.Cores,
		Threads: threads, Level: level, ORTVersion: e.ORTVersion, GoVersion: e.GoVersion}
}
