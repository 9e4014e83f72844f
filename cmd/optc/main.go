// Command optc optimizes, quantizes and compiles ONNX models.
package main

import (
	"os"

	"optc/cmd"
)

func main() {
	os.Exit(cmd.Main(os.Args[1:], cmd.StdIO()))
}
