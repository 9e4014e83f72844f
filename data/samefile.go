package data

import "os"

// SameFile says whether paths a and b name one existing file (a link or
// another spelling of the path counts): an output that would overwrite an
// input, or evaluation data that is the calibration data.
func SameFile(a, b string) bool {
	fa, err := os.Stat(a)
	if err != nil {
		return false
	}
	fb, err := os.Stat(b)
	if err != nil {
		return false
	}
	return os.SameFile(fa, fb)
}
