// Package passes will hold optc's graph rewrites: an ordered table of
// passes, one file each, every one checked numerically in ONNX Runtime.
// Nothing is implemented yet; see docs/DESIGN.md.
package passes
