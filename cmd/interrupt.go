package cmd

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"github.com/optc-dev/optc/internal/atomicfile"
)

// ExitOnSignal makes Ctrl-C (SIGINT) and SIGTERM remove the temporary files
// and folders being written (atomicfile.Create), print one line and exit
// with status 128+signal, so that an interrupted command leaves neither a
// partial output nor a temporary behind. Outputs appear only by rename, so
// what exists is complete.
func ExitOnSignal(errOut io.Writer) {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		s := <-sigs
		// Held until the process exits: the command's own writes (a
		// stage failing once its temporaries are gone) wait behind it,
		// so the interrupt's line is the last one.
		interruptGate.Lock()
		atomicfile.RemoveTemps()
		name := "SIGTERM"
		if s == os.Interrupt {
			name = "Ctrl-C (SIGINT)"
		}
		fmt.Fprintf(errOut, "optc: interrupted by %s; temporary files removed, no partial output left\n", name)
		code := 1
		if n, ok := s.(syscall.Signal); ok {
			code = 128 + int(n)
		}
		os.Exit(code)
	}()
}

// interruptGate orders the process's writes (StdIO) with ExitOnSignal's:
// once a signal is being handled nothing else is written.
var interruptGate sync.Mutex

// gatedWriter writes to w under interruptGate.
type gatedWriter struct{ w io.Writer }

func (g gatedWriter) Write(p []byte) (int, error) {
	interruptGate.Lock()
	defer interruptGate.Unlock()
	return g.w.Write(p)
}
