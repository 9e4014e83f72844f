package build

import (
	"path/filepath"
	"strings"

	"github.com/optc-dev/optc/ptq"
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
	for _, q := range []*ptq.Result{b.res.INT8, b.res.INT8TRT, b.res.Dynamic} {
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
