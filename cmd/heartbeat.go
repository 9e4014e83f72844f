package cmd

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// heartbeatEvery bounds the silence of a command's progress log: a CI job
// or a user watching a long build hears from it at least this often (the
// stages' own lines come every ptq.ProgressEvery inside their loops; a
// single long measurement, such as a placement timing window or a Triton
// sweep of a large model, has none).
const heartbeatEvery = 12 * time.Second

// heartbeat passes progress lines through and, when nothing has been
// written for every, repeats the last line with how long its step has
// run, so that the log is never silent for longer than every.
type heartbeat struct {
	w     io.Writer
	every time.Duration

	mu      sync.Mutex
	last    string    // the last line written, without its newline
	at      time.Time // when it was written
	timer   *time.Timer
	stopped bool
}

func newHeartbeat(w io.Writer, every time.Duration) *heartbeat {
	return &heartbeat{w: w, every: every}
}

func (h *heartbeat) Write(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	n, err := h.w.Write(p)
	if h.stopped {
		return n, err
	}
	if s := strings.TrimRight(string(p), "\n"); s != "" {
		h.last = s[strings.LastIndexByte(s, '\n')+1:]
	}
	h.at = time.Now()
	if h.timer == nil {
		h.timer = time.AfterFunc(h.every, h.beat)
	} else {
		h.timer.Reset(h.every)
	}
	return n, err
}

// beat repeats the last line with the time since it was written.
func (h *heartbeat) beat() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stopped || h.last == "" {
		return
	}
	fmt.Fprintf(h.w, "%s (still running: %s)\n", h.last, time.Since(h.at).Round(time.Second))
	h.timer.Reset(h.every)
}

// stop ends the heartbeats: the command is done.
func (h *heartbeat) stop() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.stopped = true
	if h.timer != nil {
		h.timer.Stop()
	}
}
