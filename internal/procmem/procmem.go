// Package procmem reads this process's memory figures from
// /proc/self/status (Linux): resident memory now and at its peak.
package procmem

import (
	"os"
	"strconv"
	"strings"
)

// Status returns the figure key of /proc/self/status (VmRSS: resident
// memory now, VmHWM: its peak) in bytes, and false where /proc does not
// have it.
func Status(key string) (int64, bool) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, false
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, key+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				return 0, false
			}
			return kb << 10, true
		}
	}
	return 0, false
}

// RSS is the process's resident memory now in bytes (ORT's buffers
// included), 0 where /proc does not say.
func RSS() int64 {
	n, _ := Status("VmRSS")
	return n
}
