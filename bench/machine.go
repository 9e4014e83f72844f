package bench

import (
	"os"
	"runtime"
	"strings"

	"golang.org/x/sys/cpu"

	"github.com/optc-dev/optc/ort"
)

// Environment is the machine the measurements come from.
type Environment struct {
	OS         string   `json:"os"`
	Arch       string   `json:"arch"`
	CPU        string   `json:"cpu"`
	CPUFlags   []string `json:"cpu_features"` // the ones that change INT8 speed
	Cores      int      `json:"cores"`
	ORTVersion string   `json:"ort_version"`
	GoVersion  string   `json:"go_version"`
}

// MeasuredOn describes this machine: where the timings come from.
func MeasuredOn() Environment {
	v, _ := ort.Version()
	e := Environment{OS: runtime.GOOS, Arch: runtime.GOARCH, CPU: cpuModel(), Cores: runtime.NumCPU(),
		ORTVersion: v, GoVersion: runtime.Version()}
	for _, f := range []struct {
		name string
		has  bool
	}{
		{"avx2", cpu.X86.HasAVX2}, {"avx512f", cpu.X86.HasAVX512F}, {"avx512vnni", cpu.X86.HasAVX512VNNI},
		{"avxvnni", cpu.X86.HasAVXVNNI}, {"avx512bf16", cpu.X86.HasAVX512BF16},
		{"asimddp", cpu.ARM64.HasASIMDDP}, {"i8mm", cpu.ARM64.HasI8MM},
	} {
		if f.has {
			e.CPUFlags = append(e.CPUFlags, f.name)
		}
	}
	return e
}

// cpuModel is the CPU's model name from /proc/cpuinfo ("" elsewhere).
func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
