// Package testenv finds the data that tests need and is not in the
// repository (fetched by scripts/fetch-testdata.sh into optc's cache
// folder, install.CacheDir).
package testenv

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/optc-dev/optc/ort/install"
)

// Data returns the path of rel under the cache folder. When it is missing
// the test is skipped, except under CI (CI=true), where a missing input is
// a failure: CI must never pass by skipping.
func Data(t testing.TB, rel string) string {
	t.Helper()
	p := filepath.Join(install.CacheDir(), rel)
	if _, err := os.Stat(p); err != nil {
		msg := "test data " + p + " is missing; run `make testdata` (scripts/fetch-testdata.sh)"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return p
}

// RepoRoot is the root of the optc source tree.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// Model returns the path of a model committed under testdata/models.
func Model(name string) string {
	return filepath.Join(RepoRoot(), "testdata", "models", name)
}

// RealModel is one of the real models tests run: the committed MNIST CNN
// and the PaddleOCR models, with the shape of one sample of input 0 (the
// OCR inputs are dynamic: these are sizes the models accept).
type RealModel struct {
	Name, Path string
	Input      []int64
}

// RealModels lists the real models, their paths resolved (see Data).
func RealModels(t testing.TB) []RealModel {
	t.Helper()
	return []RealModel{
		{"mnist_cnn", Model("mnist_cnn.onnx"), []int64{1, 1, 28, 28}},
		{"cls", Data(t, "ocr-models/ch_ppocr_mobile_v2.0_cls_infer.onnx"), []int64{1, 3, 48, 192}},
		{"det", Data(t, "ocr-models/ch_PP-OCRv4_det_infer.onnx"), []int64{1, 3, 64, 64}},
		{"rec", Data(t, "ocr-models/ch_PP-OCRv4_rec_infer.onnx"), []int64{1, 3, 48, 160}},
	}
}
