package build

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"time"

	"github.com/optc-dev/optc/internal/procmem"
)

// MemProfileEnv names a folder where a build writes what docs/DESIGN.md's
// memory model was measured with: a Go heap profile at the end of each
// stage (NN-stage.heap, for `go tool pprof`) and timeline.tsv, sampled
// every 200 ms: seconds since the start, the stage, the process's
// resident memory (VmRSS: ORT's buffers included), the Go heap in use
// and obtained from the system, and the last progress line (which step of
// the stage it is in). The difference between RSS and the Go
// heap is mostly ORT's. A debugging aid, not a flag: it changes nothing
// the build writes.
const MemProfileEnv = "OPTC_MEMPROFILE"

// memProfile is the running profile of one build; nil when off.
type memProfile struct {
	dir   string
	f     *os.File
	start time.Time
	mu    sync.Mutex
	stage string
	last  string // the last progress line
	stop  chan struct{}
	done  chan struct{}
}

// startMemProfile starts the timeline when $OPTC_MEMPROFILE is set; a
// folder that cannot be made is said on progress and the build goes on.
func startMemProfile(progress func(string, ...any)) *memProfile {
	dir := os.Getenv(MemProfileEnv)
	if dir == "" {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		progress("%s: %v (no memory profile)", MemProfileEnv, err)
		return nil
	}
	f, err := os.Create(filepath.Join(dir, "timeline.tsv"))
	if err != nil {
		progress("%s: %v (no memory profile)", MemProfileEnv, err)
		return nil
	}
	p := &memProfile{dir: dir, f: f, start: time.Now(), stage: "plan", stop: make(chan struct{}), done: make(chan struct{})}
	fmt.Fprintln(f, "seconds\tstage\trss_mib\tgo_heap_inuse_mib\tgo_heap_sys_mib\tlast_line")
	go func() {
		defer close(p.done)
		defer f.Close()
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			p.sample()
			select {
			case <-p.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return p
}

// sample writes one timeline line.
func (p *memProfile) sample() {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.f, "%.1f\t%s\t%.0f\t%.0f\t%.0f\t%s\n", time.Since(p.start).Seconds(), p.stage,
		vmRSSMiB(), float64(ms.HeapInuse)/(1<<20), float64(ms.HeapSys)/(1<<20), p.last)
}

// stageStarted names the stage the timeline's next samples belong to, and
// takes one at once: a stage shorter than the ticker's period has one too.
func (p *memProfile) stageStarted(name string) {
	if p == nil {
		return
	}
	p.mu.Lock()
	p.stage = name
	p.mu.Unlock()
	p.sample()
}

// said records the last progress line.
func (p *memProfile) said(line string) {
	if p == nil {
		return
	}
	line = strings.Join(strings.Fields(line), " ")
	if len(line) > 80 {
		line = line[:80]
	}
	p.mu.Lock()
	p.last = line
	p.mu.Unlock()
}

// stageDone writes the heap profile of stage i (after a collection, so
// that it shows what is still held; its alloc_space view shows what the
// build allocated so far, by call site).
func (p *memProfile) stageDone(i int, name string) {
	if p == nil {
		return
	}
	runtime.GC()
	f, err := os.Create(filepath.Join(p.dir, fmtStage(i, name)))
	if err != nil {
		return
	}
	defer f.Close()
	pprof.Lookup("heap").WriteTo(f, 0)
}

// fmtStage names stage i's heap profile.
func fmtStage(i int, name string) string { return fmt.Sprintf("%02d-%s.heap", i+1, name) }

func (p *memProfile) close() {
	if p == nil {
		return
	}
	close(p.stop)
	<-p.done
}

// vmRSSMiB is the process's resident memory now (peakRSSMiB is the most
// it has been); 0 where /proc does not say.
func vmRSSMiB() float64 { return float64(procmem.RSS()) / (1 << 20) }
