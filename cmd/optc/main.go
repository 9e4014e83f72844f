// Command optc optimizes, quantizes and compiles ONNX models.
package main

import (
	"os"

	"github.com/optc-dev/optc/cmd"
)

func main() {
	cmd.ExitOnSignal(os.Stderr)
	os.Exit(cmd.Main(os.Args[1:], cmd.StdIO()))
}
