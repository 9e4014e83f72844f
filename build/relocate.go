package build

import (
	"path/filepath"
	"strings"

	"github.com/optc-dev/optc/ptq"
	"github.com/optc-dev/optc/quantize"
)

// relocate rewrites the paths the stages recorded inside the working
// folder to where they are once the build is renamed into place: a report
// names the files the user has, never a temporary folder that is gone.
func (b *builder) relocate() {
	final := func(p *string) {
		if *p == "" || b.dir.tmp == "" {
			return
		}
		if r, ok := strings.CutPrefix(*p, b.dir.tmp); ok {
			*p = filepath.Join(b.c.Output, strings.TrimPrefix(r, string(filepath.Separator)))
		}
	}
	if o := b.res.Optimize; o != nil {
		final(&o.Output)
		if o.After != nil {
			final(&o.After.Path)
		}
	}
	qs := []*ptq.Result{b.res.Dynamic}
	for _, scheme := range quantize.Targets() {
		qs = append(qs, b.res.INT8[scheme])
	}
	for _, q := range qs {
		if q != nil {
			final(&q.Input)
			final(&q.Output)
			final(&q.Calibration.Cache)
		}
	}
	for i := range b.res.Notes {
		b.res.Notes[i] = strings.ReplaceAll(b.res.Notes[i], b.dir.tmp, b.c.Output)
	}
}
