package build

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/optc-dev/optc/ort"
)

// A record is checked when it is read: its schema, its fields, and the
// placement.json it refers to; each error names the file.
func TestReadReplayErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := readReplay(dir); err == nil || !strings.Contains(err.Error(), dir+" has no decisions.json") {
		t.Errorf("a folder without a record: %v", err)
	}
	path := filepath.Join(dir, decisionsFile)
	write := func(d any) {
		t.Helper()
		b, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(dir, "placement.json"), []byte("{}\n"), 0o644)
	placed := Decisions{Schema: DecisionsSchema, Model: FileDigest{Path: "model.fp32.onnx", SHA256: "ab"},
		Placement: &PlacementDecision{File: "placement.json", SHA256: "not its digest"}}
	for _, tc := range []struct {
		record any
		want   string
	}{
		{Decisions{Schema: 7, Model: FileDigest{SHA256: "ab"}}, "schema 7, this optc reads 1"},
		{map[string]any{"schema": 1, "budget": 3}, `unknown field "budget"`},
		{Decisions{Schema: DecisionsSchema}, "no model digest"},
		{placed, "placement.json has sha256 "},
	} {
		write(tc.record)
		if _, err := readReplay(dir); err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: got %v, want an error naming %s and %q", tc.record, err, path, tc.want)
		}
	}
	fd, _ := digest(filepath.Join(dir, "placement.json"))
	placed.Placement.SHA256 = fd.SHA256
	write(placed)
	r, err := readReplay(path) // the file itself, not its folder
	if err != nil {
		t.Fatal(err)
	}
	// A decision the build needs and the record lacks names both.
	b := &builder{replay: r}
	if _, _, err := b.replayedTarget("triton"); err == nil || !strings.Contains(err.Error(), "replaying "+path+": it records no triton decision") {
		t.Errorf("a missing target decision: %v", err)
	}
	if err := b.replayLayout(); err == nil || !strings.Contains(err.Error(), "no nchwc decision") {
		t.Errorf("a missing nchwc decision: %v", err)
	}
}

// The nchwc stage's decision replays: PaddleOCR cls shaped and deployed
// (runtime.nchwc on, so that it is deployed whatever timing would say),
// then built again replaying that record: the same shaped model at the
// recorded block, deployed without timing, the same record. A record
// whose shaped model does not come out the same is refused.
func TestBuildReplayNCHWc(t *testing.T) {
	if ort.NCHWcBlock() == 0 {
		t.Skip("ORT has no NCHWc layout on this CPU")
	}
	dir := t.TempDir()
	c := clsConfig(t, filepath.Join(dir, "first"))
	c.Runtime.NCHWc = "on"
	run(t, c)
	var rec Decisions
	readJSON(t, filepath.Join(c.Output, decisionsFile), &rec)
	if d := rec.NCHWc; d == nil || !d.Deployed || d.Timed || d.Block != ort.NCHWcBlock() || d.SHA256 != fileSHA(t, filepath.Join(c.Output, layoutModel)) {
		t.Fatalf("nchwc decision %+v", rec.NCHWc)
	}

	again := c
	again.Output, again.Runtime.NCHWc, again.Replay = filepath.Join(dir, "second"), "auto", c.Output
	res := run(t, again)
	if l := res.Layout; l == nil || !l.Deployed || l.Timing != nil || !strings.Contains(l.Reason, "replayed from "+filepath.Join(c.Output, decisionsFile)) {
		t.Errorf("replayed nchwc stage: %+v", res.Layout)
	}
	for _, f := range []string{layoutModel, decisionsFile} {
		if fileSHA(t, filepath.Join(c.Output, f)) != fileSHA(t, filepath.Join(again.Output, f)) {
			t.Errorf("%s differs from the build replayed", f)
		}
	}

	// Another block shapes another model: refused, naming the record.
	rec.NCHWc.Block = 24 - rec.NCHWc.Block // 8 <-> 16
	b, _ := json.Marshal(rec)
	tampered := filepath.Join(dir, "tampered.json")
	os.WriteFile(tampered, b, 0o644)
	again.Output, again.Replay = filepath.Join(dir, "third"), tampered
	_, err := Run(context.Background(), Options{Config: again})
	if err == nil || !strings.HasPrefix(err.Error(), "nchwc: replaying "+tampered+": its nchwc decision deploys") {
		t.Errorf("a record whose shaped model differs: %v", err)
	}
}
