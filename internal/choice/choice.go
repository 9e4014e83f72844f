// Package choice spells a list of accepted names the one way messages and
// help text use: "a, b or c". The lists themselves live with the code that
// understands the names (calibrate.Methods, ort.Levels, config.Targets,
// ...); validation, flags, completion and messages all read those lists.
package choice

import "strings"

// Or is "a", "a or b", or "a, b or c".
func Or[S ~string](names []S) string {
	s := make([]string, len(names))
	for i, n := range names {
		s[i] = string(n)
	}
	switch len(s) {
	case 0:
		return ""
	case 1:
		return s[0]
	}
	return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
}

// Strings converts a list of named strings to plain strings (for flag
// completion).
func Strings[S ~string](names []S) []string {
	s := make([]string, len(names))
	for i, n := range names {
		s[i] = string(n)
	}
	return s
}
