package build

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"github.com/optc-dev/optc/bench"
	"github.com/optc-dev/optc/config"
	"github.com/optc-dev/optc/graph"
)

// Manifest is manifest.json: what went in, what came out, with digests,
// and the accuracy each artifact kept. It holds no timings, so two builds
// of the same inputs give the same manifest (timings are in report.json).
type Manifest struct {
	Schema      int        `json:"schema"`
	OptcVersion string     `json:"optc_version"`
	GoVersion   string     `json:"go_version"`
	ORTVersion  string     `json:"ort_version"`
	Input       FileDigest `json:"input"`
	// InputSideFiles are the files the input model keeps tensors in
	// (external data), relative to its folder.
	InputSideFiles []FileDigest      `json:"input_side_files,omitempty"`
	Data           []FileDigest      `json:"data"` // calibration and evaluation data, labels
	Options        config.Config     `json:"options"`
	Artifacts      []ManifestEntry   `json:"artifacts"`
	Accuracy       map[string]*Check `json:"accuracy"` // per model artifact
}

// FileDigest is a file's (or a folder's) sha256 and size.
type FileDigest struct {
	Role   string `json:"role,omitempty"`
	Path   string `json:"path"`
	Bytes  int64  `json:"bytes"`
	SHA256 string `json:"sha256"`
}

// ManifestEntry is one artifact.
type ManifestEntry struct {
	Path      string `json:"path"`
	Target    string `json:"target"`
	Kind      string `json:"kind"`
	Precision string `json:"precision,omitempty"`
	Bytes     int64  `json:"bytes"`
	SHA256    string `json:"sha256"`
}

// ReadManifest reads the manifest.json of the build folder dir.
func ReadManifest(dir string) (*Manifest, error) {
	path := filepath.Join(dir, "manifest.json")
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%s: not a build manifest: %w", path, err)
	}
	if m.Schema != 1 {
		return nil, fmt.Errorf("%s: manifest schema %d, this optc reads 1", path, m.Schema)
	}
	return &m, nil
}

// report digests every artifact and writes manifest.json, then the
// reports (report.json, report.md, report.html).
func (b *builder) report() error {
	b.checkOverrun()
	if err := b.writeDecisions(); err != nil {
		return err
	}
	if err := b.checkFolder(); err != nil {
		return err
	}
	for _, a := range b.res.Artifacts {
		d, err := digest(b.dir.tmpPath(a.Path))
		if err != nil {
			return err
		}
		a.Bytes, a.SHA256 = d.Bytes, d.SHA256
	}
	b.res.Environment = bench.MeasuredOn()
	b.relocate()
	man := Manifest{Schema: 1, OptcVersion: b.opts.Version, GoVersion: runtime.Version(),
		ORTVersion: b.res.Environment.ORTVersion, Options: b.c, Accuracy: map[string]*Check{}}
	// Where the output goes is not part of what was built, nor where its
	// decisions were replayed from (decisions.json holds them).
	man.Options.Output, man.Options.Force, man.Options.Replay = "", false, ""
	var err error
	if man.Input, err = digest(b.c.Model); err != nil {
		return err
	}
	man.Input.Role, man.Input.Path = "model", b.c.Model
	if man.InputSideFiles, err = sideFileDigests(b.c.Model); err != nil {
		return err
	}
	for _, d := range []struct{ role, path string }{
		{"calibration", b.c.Calibration.Data}, {"eval", b.c.Eval.Data}, {"eval_labels", b.c.Eval.Labels},
	} {
		if d.path == "" || d.path == "random" {
			continue
		}
		fd, err := digest(d.path)
		if err != nil {
			return err
		}
		fd.Role, fd.Path = d.role, d.path
		man.Data = append(man.Data, fd)
	}
	for _, a := range b.res.Artifacts {
		man.Artifacts = append(man.Artifacts, ManifestEntry{Path: a.Path, Target: a.Target, Kind: a.Kind,
			Precision: a.Precision, Bytes: a.Bytes, SHA256: a.SHA256})
		if a.Check != nil {
			man.Accuracy[a.Path] = a.Check
		}
	}
	slices.SortFunc(man.Artifacts, func(x, y ManifestEntry) int { return strings.Compare(x.Path, y.Path) })
	if err := writeJSONFile(b, "manifest.json", man); err != nil {
		return err
	}
	return b.res.writeReport(b.dir.tmp)
}

// reportFiles are written last and hold timings, so the manifest leaves
// them out (two builds of the same inputs keep the same manifest).
var reportFiles = []string{"manifest.json", "report.json", "report.md", "report.html"}

// checkFolder makes sure every file in the working folder was recorded as
// an artifact (and so is in the manifest), and every artifact exists.
func (b *builder) checkFolder() error {
	known := map[string]bool{}
	for _, f := range reportFiles {
		known[f] = true
	}
	for _, a := range b.res.Artifacts {
		known[a.Path] = true
	}
	return filepath.WalkDir(b.dir.tmp, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		r := rel(b, p)
		if !known[r] {
			return fmt.Errorf("internal: %s was written but not recorded as an artifact", r)
		}
		return nil
	})
}

// sideFileDigests digests the external-data files of the model at path.
func sideFileDigests(path string) ([]FileDigest, error) {
	m, err := graph.LoadFile(path)
	if err != nil {
		return nil, err
	}
	defer m.Close()
	var out []FileDigest
	for _, loc := range m.SideFiles() {
		fd, err := digest(filepath.Join(filepath.Dir(path), filepath.FromSlash(loc)))
		if err != nil {
			return nil, err
		}
		fd.Path = loc
		out = append(out, fd)
	}
	return out, nil
}

// digest hashes a file, or a folder's files in sorted path order (each
// contributing its relative path and bytes).
func digest(path string) (FileDigest, error) {
	h := sha256.New()
	var n int64
	add := func(p string) error {
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		c, err := io.Copy(h, f)
		n += c
		return err
	}
	st, err := os.Stat(path)
	if err != nil {
		return FileDigest{}, err
	}
	if !st.IsDir() {
		err = add(path)
	} else {
		// WalkDir visits in lexical order, so the digest is stable.
		err = filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			r, _ := filepath.Rel(path, p)
			h.Write([]byte(filepath.ToSlash(r) + "\x00"))
			return add(p)
		})
	}
	if err != nil {
		return FileDigest{}, fmt.Errorf("digest of %s: %w", path, err)
	}
	return FileDigest{Path: path, Bytes: n, SHA256: hex.EncodeToString(h.Sum(nil))}, nil
}
