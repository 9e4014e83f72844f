// Command run is optc's benchmark suite (`make bench`, `make
// bench-quick`): it prints the tables and writes them, and the results as
// JSON, into the -o folder.
//
//	go run ./tools/benchsuite/run [-quick] [-repeats N] [-o out/bench]
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/optc-dev/optc/internal/atomicfile"
	"github.com/optc-dev/optc/tools/benchsuite"
	"github.com/optc-dev/optc/tools/testenv"
)

func main() {
	quick := flag.Bool("quick", false, "the quick subset (MNIST and cls, fewer repeats)")
	repeats := flag.Int("repeats", 0, "repeats of every A/B pair (default 3 quick, 5 full)")
	out := flag.String("o", "out/bench", "folder for results.json and results.md (results-quick.* with -quick)")
	only := flag.String("only", "", "run only the sections whose name contains this (e.g. \"model speed\")")
	models := flag.String("models", "", "the zoo section's models, comma-separated (default: all of them)")
	flag.Parse()
	var keep []string
	if *models != "" {
		keep = strings.Split(*models, ",")
	}
	if err := run(benchsuite.Options{Quick: *quick, Repeats: *repeats, Only: *only, Models: keep, Root: testenv.RepoRoot(), Progress: os.Stderr}, *out); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(opts benchsuite.Options, out string) error {
	work, err := os.MkdirTemp("", "optc-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	opts.Work = work
	res, err := benchsuite.Run(opts)
	if err != nil {
		return err
	}
	var table bytes.Buffer
	if err := benchsuite.WriteTable(&table, res); err != nil {
		return err
	}
	os.Stdout.Write(table.Bytes())
	js, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	name := "results"
	if opts.Quick {
		name = "results-quick"
	}
	if err := atomicfile.Write(filepath.Join(out, name+".json"), js, []byte("\n")); err != nil {
		return err
	}
	if err := atomicfile.Write(filepath.Join(out, name+".md"), table.Bytes()); err != nil {
		return err
	}
	if len(res.Errors) > 0 {
		return fmt.Errorf("%d section(s) failed (see the table)", len(res.Errors))
	}
	return nil
}
