//go:build !unix

package graph

import "os"

// mapFile reads the whole file where memory maps are not available.
func mapFile(path string) ([]byte, func() error, error) {
	b, err := os.ReadFile(path)
	return b, func() error { return nil }, err
}
