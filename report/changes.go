package report

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/optc-dev/optc/internal/choice"
)

// Change is one option, input, version or decision that differs between
// the two builds a diff compares: the first thing a reviewer asks about a
// changed figure.
type Change struct {
	What string `json:"what"` // a config key (calibration.method), input model, optc, placement, ...
	Old  string `json:"old"`
	New  string `json:"new"`
}

// manifest is the part of a build's manifest.json that Changes reads.
type manifest struct {
	OptcVersion string          `json:"optc_version"`
	GoVersion   string          `json:"go_version"`
	ORTVersion  string          `json:"ort_version"`
	Input       *manifestFile   `json:"input"`
	Data        []manifestFile  `json:"data"`
	Options     json.RawMessage `json:"options"`
}

type manifestFile struct {
	Role   string `json:"role"`
	Path   string `json:"path"`
	SHA256 string `json:"sha256"`
}

// notCompared are options whose difference says nothing about the
// artifacts: where the build was written, whether it replaced a folder.
var notCompared = []string{"output", "force"}

// Changes lists what differs between the builds old and new come from:
// the effective options each was built with (manifest.json beside
// report.json: every config key), the input model's and data's content,
// the versions of optc, Go and ONNX Runtime, the CPU, and the decisions
// each build measured (the ORT artifact's INT8 placement, the NCHWc
// layout, the calibration samples used). A report without a manifest
// beside it (a quantize or bench report, or one copied alone) has only
// its decisions compared, and a line says so.
func Changes(old, new *Report) []Change {
	var out []Change
	add := func(what, a, b string) {
		if a != b {
			out = append(out, Change{what, a, b})
		}
	}
	mo, errOld := readManifest(old)
	mn, errNew := readManifest(new)
	switch {
	case errOld == nil && errNew == nil:
		add("optc", mo.OptcVersion, mn.OptcVersion)
		add("go", mo.GoVersion, mn.GoVersion)
		add("onnx runtime", mo.ORTVersion, mn.ORTVersion)
		if mo.Input != nil && mn.Input != nil {
			add("input model", short(mo.Input.SHA256), short(mn.Input.SHA256))
		}
		byRole := func(m *manifest) map[string]string {
			r := map[string]string{}
			for _, d := range m.Data {
				r[d.Role] = short(d.SHA256)
			}
			return r
		}
		do, dn := byRole(mo), byRole(mn)
		for _, role := range sortedKeys(do, dn) {
			add(role+" data", orNone(do[role]), orNone(dn[role]))
		}
		oo, on := map[string]string{}, map[string]string{}
		flatten("", mo.Options, oo)
		flatten("", mn.Options, on)
		for _, k := range sortedKeys(oo, on) {
			if !slices.Contains(notCompared, k) {
				add(k, orNone(oo[k]), orNone(on[k]))
			}
		}
	case errOld != nil && errNew != nil:
		out = append(out, Change{"options", "not recorded", "not recorded"})
	case errOld != nil:
		out = append(out, Change{"options", "not recorded", "recorded"})
	default:
		out = append(out, Change{"options", "recorded", "not recorded"})
	}
	add("cpu", old.Environment.CPU, new.Environment.CPU)
	add("decision: ort artifact", placementDecision(old), placementDecision(new))
	add("decision: nchwc", nchwcDecision(old), nchwcDecision(new))
	qo, qn := quantizationDecisions(old), quantizationDecisions(new)
	for _, k := range sortedKeys(qo, qn) {
		add("decision: "+k, orNone(qo[k]), orNone(qn[k]))
	}
	return out
}

func readManifest(r *Report) (*manifest, error) {
	if r.path == "" {
		return nil, os.ErrNotExist
	}
	b, err := os.ReadFile(filepath.Join(filepath.Dir(r.path), "manifest.json"))
	if err != nil {
		return nil, err
	}
	var m manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	return &m, nil
}

// flatten writes a JSON object's leaves as dotted keys (calibration.method)
// with their JSON text; a list is one value.
func flatten(prefix string, raw json.RawMessage, out map[string]string) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err == nil && obj != nil {
		for k, v := range obj {
			flatten(prefix+k+".", v, out)
		}
		return
	}
	if len(raw) == 0 || string(raw) == "null" {
		return
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		out[strings.TrimSuffix(prefix, ".")] = s
		return
	}
	out[strings.TrimSuffix(prefix, ".")] = string(raw)
}

func placementDecision(r *Report) string {
	p := r.Placement
	if p == nil {
		return ""
	}
	if p.Recommended == "fp32" {
		return "fp32 (int8 " + p.Summary() + " not faster)"
	}
	return p.Recommended + " (" + p.Summary() + ")"
}

func nchwcDecision(r *Report) string {
	if r.NCHWc == nil {
		return ""
	}
	if r.NCHWc.Deployed {
		return fmt.Sprintf("deployed (block %d)", r.NCHWc.Block)
	}
	return "not deployed"
}

// quantizationDecisions are what each quantization used and decided:
// the calibration method and samples, the layers the guard kept float,
// the techniques applied.
func quantizationDecisions(r *Report) map[string]string {
	out := map[string]string{}
	for _, q := range r.Quantization {
		if q == nil {
			continue
		}
		out[q.Target+" calibration"] = fmt.Sprintf("%s on %d samples", q.Method, q.CalibSamples)
		out[q.Target+" layers kept float"] = fmt.Sprint(len(q.FellBack))
		if q.Techniques != nil && len(q.Techniques.Applied) > 0 {
			out[q.Target+" techniques"] = strings.Join(choice.Strings(q.Techniques.Applied), ",")
		}
	}
	return out
}

func short(sha string) string {
	if len(sha) > 12 {
		return "sha256 " + sha[:12]
	}
	return sha
}

func orNone(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func sortedKeys(a, b map[string]string) []string {
	var keys []string
	for k := range a {
		keys = append(keys, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}
