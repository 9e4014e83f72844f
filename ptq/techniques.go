package ptq

// equalizeIterations is how many passes cross-layer equalization makes
// over the model: a layer in two pairs (the middle of a chain) is
// rescaled by both, and the ranges settle over a few passes.
const equalizeIterations = 4
