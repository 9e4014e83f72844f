package cmd

import (
	"strings"
	"sync"
	"testing"
	"time"
)

// lockedBuilder is a strings.Builder safe for the heartbeat's timer.
type lockedBuilder struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuilder) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuilder) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestHeartbeat: after a silence the last line comes again with the time
// its step has run; a new line restarts the wait; nothing comes before
// the first line or after stop.
func TestHeartbeat(t *testing.T) {
	var out lockedBuilder
	h := newHeartbeat(&out, 30*time.Millisecond)
	time.Sleep(80 * time.Millisecond)
	if out.String() != "" {
		t.Fatalf("a heartbeat before any line: %q", out.String())
	}
	h.Write([]byte("build: first\nbuild: placement: timing fp32\n"))
	time.Sleep(100 * time.Millisecond)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) < 4 || lines[2] != "build: placement: timing fp32 (still running: 0s)" {
		t.Fatalf("no heartbeats after a silence: %q", lines)
	}
	h.Write([]byte("build: sweep\n"))
	time.Sleep(50 * time.Millisecond)
	if !strings.Contains(out.String(), "build: sweep (still running: 0s)\n") {
		t.Errorf("a new line did not become the heartbeat's: %q", out.String())
	}
	h.stop()
	n := len(out.String())
	time.Sleep(80 * time.Millisecond)
	if len(out.String()) != n {
		t.Errorf("heartbeats after stop: %q", out.String()[n:])
	}
}
