package report

import (
	"bytes"
	"encoding/json"
	"path/filepath"

	"github.com/optc-dev/optc/internal/atomicfile"
)

// WriteFolder writes report.json, report.md and report.html into dir.
func (r *Report) WriteFolder(dir string) error {
	js, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	var md, html bytes.Buffer
	if err := r.WriteMarkdown(&md); err != nil {
		return err
	}
	if err := r.WriteHTML(&html); err != nil {
		return err
	}
	for _, f := range []struct {
		name string
		b    []byte
	}{{"report.json", append(js, '\n')}, {"report.md", md.Bytes()}, {"report.html", html.Bytes()}} {
		if err := atomicfile.Write(filepath.Join(dir, f.name), f.b); err != nil {
			return err
		}
	}
	return nil
}
