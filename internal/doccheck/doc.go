// Package doccheck holds the test of the repository's Markdown: every
// relative link resolves to a file (and heading) in the repository, and no
// page points at files outside it. It has no code of its own.
package doccheck
