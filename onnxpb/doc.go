// Package onnxpb holds the ONNX protobuf types, generated from onnx.proto.
//
// Only package graph (and tests) should need these types; everything else
// works on the IR.
package onnxpb

//go:generate protoc --go_out=. --go_opt=paths=source_relative --go_opt=Monnx.proto=github.com/optc-dev/optc/onnxpb onnx.proto
