// Package release tests what `make release` writes: the linux/amd64 and
// linux/arm64 binaries run (the one not native under qemu-user with
// Debian's cross libraries), find the ONNX Runtime library of their
// platform from the same npm tarball, and agree with each other.
// `make release-check` builds the release and runs this; without
// OPTC_RELEASE_DIR the test is skipped.
package release
