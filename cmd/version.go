package cmd

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"

	"github.com/optc-dev/optc/ort"
)

// Version is optc's semantic version. A release sets it at link time
// (make release: -ldflags "-X github.com/optc-dev/optc/cmd.Version=v0.1.0");
// when it is empty, the version the go command recorded is used: the tag
// for `go install github.com/optc-dev/optc/cmd/optc@v0.1.0`, a
// pseudo-version (v0.0.0-date-commit, +dirty when modified) for a build in
// a git checkout, else v0.0.0-devel.
var Version = ""

// Commit and Modified ("true") are set at link time by make release, for
// builds where the go command records no vcs.revision (a git worktree,
// whose .git is a file; -buildvcs=false).
var Commit, Modified = "", ""

// BuildInfo is what optc knows about its own build.
type BuildInfo struct {
	Version  string `json:"version"`
	Commit   string `json:"commit,omitempty"`   // vcs.revision
	Time     string `json:"time,omitempty"`     // vcs.time, the commit's time
	Modified bool   `json:"modified,omitempty"` // built from a tree with uncommitted changes
}

// ReadBuildInfo returns optc's version and the commit it was built from
// (runtime/debug.ReadBuildInfo: vcs.revision, vcs.time, vcs.modified).
func ReadBuildInfo() BuildInfo {
	b := BuildInfo{Version: Version}
	info, ok := debug.ReadBuildInfo()
	if ok {
		if b.Version == "" && info.Main.Version != "" && info.Main.Version != "(devel)" {
			b.Version = info.Main.Version
		}
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				b.Commit = s.Value
			case "vcs.time":
				b.Time = s.Value
			case "vcs.modified":
				b.Modified = s.Value == "true"
			}
		}
	}
	if b.Commit == "" && Commit != "" {
		b.Commit, b.Modified = Commit, Modified == "true"
	}
	if b.Version == "" {
		b.Version = "v0.0.0-devel"
	}
	return b
}

// String is the version followed by the commit, as `optc version` prints it.
func (b BuildInfo) String() string {
	var extra []string
	if b.Commit != "" {
		extra = append(extra, "commit "+b.Commit)
	}
	if b.Time != "" {
		extra = append(extra, b.Time)
	}
	if b.Modified {
		extra = append(extra, "modified")
	}
	if len(extra) == 0 {
		return b.Version
	}
	return b.Version + " (" + strings.Join(extra, ", ") + ")"
}

func newCmdVersion(io *IO, g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the versions of optc (and its commit), Go and the ONNX Runtime library found",
		Args:  exactArgs(0, "no arguments"),
		RunE: func(*cobra.Command, []string) error {
			fmt.Fprintf(io.Out, "optc %s\ngo   %s %s/%s\n", ReadBuildInfo(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
			// A missing runtime is reported, not an error, and not
			// fetched: version must work on a machine without it.
			path, err := ort.InitLocal(g.ortLib)
			if err != nil {
				fmt.Fprintf(io.Out, "ort  not found: %s\n", oneLine(err.Error()))
				return nil
			}
			v, _ := ort.Version()
			fmt.Fprintf(io.Out, "ort  %s (%s)\n", v, path)
			return nil
		},
	}
}
