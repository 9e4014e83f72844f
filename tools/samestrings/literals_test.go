package main

import (
	"slices"
	"testing"
)

func TestLiterals(t *testing.T) {
	src := "package p\n\nimport \"fmt\"\n\ntype T struct {\n\tA int `json:\"a\"`\n}\n\n" +
		"func f() { fmt.Println(\"INT8 kernels\", `raw`) }\n"
	got, err := literals("p.go", src)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{`"INT8 kernels"`, "`raw`"}; !slices.Equal(got, want) {
		t.Errorf("literals %q, want %q (no import path, no struct tag)", got, want)
	}
}

// A word a rename reached inside a message is one literal gone and one
// added.
func TestDifference(t *testing.T) {
	before := map[string]int{`"INT8 kernels"`: 2, `"same"`: 1}
	now := map[string]int{`"INT8 kernels"`: 1, `"schema.DecisionINT8 kernels"`: 1, `"same"`: 1}
	want := []string{`+ "schema.DecisionINT8 kernels"`, `- "INT8 kernels"`}
	if got := difference(before, now); !slices.Equal(got, want) {
		t.Errorf("difference %q, want %q", got, want)
	}
}
