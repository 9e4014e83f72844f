package build

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// $OPTC_MEMPROFILE leaves a heap profile per stage and a timeline whose
// samples name the stage and hold an RSS at least the Go heap in use.
func TestMemProfile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "prof")
	t.Setenv(MemProfileEnv, dir)
	c := mnistConfig(t, filepath.Join(t.TempDir(), "out"))
	c.Targets = []string{"ort"}
	c.Calibration.Samples, c.Eval.Samples = 32, 64
	res := run(t, c)
	for i, st := range res.Stages {
		p := filepath.Join(dir, fmtStage(i, st.Name))
		if fi, err := os.Stat(p); err != nil || fi.Size() == 0 {
			t.Errorf("stage %s: no heap profile %s (%v)", st.Name, p, err)
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, "timeline.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) < 2 || !strings.HasPrefix(lines[0], "seconds\tstage\trss_mib") {
		t.Fatalf("timeline.tsv: %d lines, header %q", len(lines), lines[0])
	}
	stages := map[string]bool{}
	for _, l := range lines[1:] {
		f := strings.Split(l, "\t")
		if len(f) != 6 {
			t.Fatalf("timeline line %q: %d fields, want 6", l, len(f))
		}
		stages[f[1]] = true
	}
	if !stages["quantize"] {
		t.Errorf("no timeline sample in quantize: %v", stages)
	}
}
