// Package calibrate is the statistics half of INT8 post-training
// quantization: it runs a model in ONNX Runtime over calibration data,
// batch by batch, and keeps for each named value its min, max, element
// count and a fixed-size histogram of |x| (HistBins bins whose range grows
// by merging adjacent bins). Memory is constant in the number of samples:
// activations are never kept across batches. Nor does it grow with the
// model: a batch whose activations pass Options.MaxRunBytes is run in
// parts (SplitByBytes, Parts), each fetching a group of the tensors and
// running only the nodes they depend on, with the same statistics as one
// run.
//
// From the statistics, Stats.Ranges derives a range per tensor with one of
// Methods (minmax, percentile, entropy, mse, and auto, which picks per
// tensor the candidate with the least quantization error). WeightScales
// gives per-channel symmetric weight scales, and Cache is the calibration
// cache file (deterministic JSON, written atomically, read strictly).
//
// Ranges are statistics, not quantization parameters: they are not widened
// to include zero and no scale or zero point is derived here; that is the
// quantizer's job.
package calibrate
