// Package doccheck holds the tests that keep the docs true: every
// relative link of the repository's Markdown resolves to a file (and
// heading) in the repository, and no page points at files outside it; the
// packages import one another in the direction docs/DESIGN.md draws
// (imports_test.go). It has no code of its own.
package doccheck
