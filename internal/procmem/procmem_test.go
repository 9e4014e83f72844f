package procmem

import "testing"

// TestStatus: the figures are read, the peak is at least the current
// resident memory, and an unknown key says so.
func TestStatus(t *testing.T) {
	rss := RSS()
	peak, ok := Status("VmHWM")
	if rss <= 0 || !ok || peak < rss {
		t.Errorf("VmRSS %d, VmHWM %d (%v)", rss, peak, ok)
	}
	if _, ok := Status("NoSuchKey"); ok {
		t.Error("an unknown key was found")
	}
}
