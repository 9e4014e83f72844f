package cmd

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/optc-dev/optc/ort/install"
)

// RuntimeInstallOptions are the inputs of `optc runtime install`.
type RuntimeInstallOptions struct {
	IO      *IO
	Install install.Options
	JSON    bool
}

// RuntimeListOptions are the inputs of `optc runtime list`.
type RuntimeListOptions struct {
	IO       *IO
	CacheDir string
	JSON     bool
}

func newCmdRuntime(io *IO, installF func(*RuntimeInstallOptions) error, listF func(*RuntimeListOptions) error) *cobra.Command {
	c := &cobra.Command{
		Use:   "runtime",
		Short: "Install and list the ONNX Runtime library optc runs models with",
		Long: `optc runs models in ONNX Runtime's shared library, loaded at run time.
'optc runtime install' fetches the official library for this platform from
the npm registry's onnxruntime-node tarball, checks the tarball's and the
library's sha256 against the digests built into optc, and unpacks only the
library into the cache folder ($OPTC_CACHE, else ~/.cache/optc on Linux and
~/Library/Caches/optc on macOS; the libraries are under onnxruntime/).
Commands that run models do the same on first use, with a one-line notice,
unless OPTC_NO_DOWNLOAD=1.

The registry is --registry, else $OPTC_NPM_REGISTRY, else
$npm_config_registry, else the one npm is configured with (npm config get
registry) when npm is installed; with none of them, give --tarball FILE.
HTTPS_PROXY, HTTP_PROXY and NO_PROXY apply.`,
		// A word that is not a subcommand is a usage error, not help.
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageError{fmt.Errorf("runtime: unknown subcommand %q (want install or list)", args[0])}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	c.AddCommand(newCmdRuntimeInstall(io, installF), newCmdRuntimeList(io, listF))
	return c
}

func newCmdRuntimeInstall(io *IO, runF func(*RuntimeInstallOptions) error) *cobra.Command {
	opts := &RuntimeInstallOptions{IO: io}
	var platforms []string
	c := &cobra.Command{
		Use:   "install [--version V] [--platform os/arch,...|all] [--tarball FILE] [--force]",
		Short: "Fetch, verify and cache the ONNX Runtime library",
		Long: `Install fetches onnxruntime-node's tarball once, checks its sha256 and
the sha256 of each library it unpacks against the digests pinned in optc,
and renames each library into the cache only when every check passed: a
failed or interrupted install leaves nothing. A library already there and
verified is kept (--force fetches it again). Prints one line per library.

Pinned: ` + pinnedHelp(),
		Args: exactArgs(0, "no arguments"),
		RunE: func(*cobra.Command, []string) error {
			o := &opts.Install
			for _, s := range platforms {
				if s == "all" {
					o.Platforms = append(o.Platforms, install.Supported(o.Version)...)
					continue
				}
				p, err := install.ParsePlatform(s)
				if err != nil {
					return usageError{fmt.Errorf("--platform: %w", err)}
				}
				o.Platforms = append(o.Platforms, p)
			}
			return runOrHook(runF, func(o *RuntimeInstallOptions) error {
				return runtimeInstallRun(context.Background(), o)
			}, opts)
		},
	}
	fs := c.Flags()
	fs.StringVar(&opts.Install.Version, "version", install.DefaultVersion, "onnxruntime-node version (one optc has digests for)")
	fs.StringSliceVar(&platforms, "platform", nil, "os/arch to install, repeatable or comma-separated, or all (default: this machine's)")
	fs.StringVar(&opts.Install.Registry, "registry", "", "npm registry URL (default: $OPTC_NPM_REGISTRY, $npm_config_registry, else npm's configured registry)")
	fs.StringVar(&opts.Install.Tarball, "tarball", "", "a downloaded onnxruntime-node .tgz to install from instead of the registry (still checked)")
	fs.BoolVar(&opts.Install.Force, "force", false, "fetch again even when the library is cached and verified")
	fs.BoolVar(&opts.JSON, "json", false, "print the installed libraries as JSON")
	return c
}

func pinnedHelp() string {
	var s []string
	for _, v := range install.Versions() {
		ps := install.Supported(v)
		names := make([]string, len(ps))
		for i, p := range ps {
			names[i] = p.String()
		}
		s = append(s, v+" ("+strings.Join(names, ", ")+")")
	}
	return strings.Join(s, "; ") + ". onnxruntime-node ships no macOS x86-64\nlibrary from 1.24 on: use --ort-lib there."
}

func runtimeInstallRun(ctx context.Context, opts *RuntimeInstallOptions) error {
	if isTerminal(opts.IO.ErrOut) {
		opts.Install.Notice = opts.IO.ErrOut // progress only where a person watches
	}
	got, err := install.Install(ctx, opts.Install)
	if err != nil {
		return err
	}
	if opts.JSON {
		type row struct {
			install.Installed
			Platform string `json:"platform"`
		}
		rows := make([]row, len(got))
		for i, g := range got {
			rows[i] = row{g, g.Platform.String()}
		}
		return writeJSON(opts.IO.Out, rows)
	}
	for _, g := range got {
		how := "already installed, sha256 verified"
		if g.Source != "" {
			how = "fetched from " + g.Source + ", sha256 verified"
		}
		fmt.Fprintf(opts.IO.Out, "ONNX Runtime %s %s: %s (%s)\n", g.Version, g.Platform, g.Path, how)
	}
	return nil
}

func newCmdRuntimeList(io *IO, runF func(*RuntimeListOptions) error) *cobra.Command {
	opts := &RuntimeListOptions{IO: io}
	c := &cobra.Command{
		Use:   "list [--json]",
		Short: "Show the cached ONNX Runtime libraries and whether each matches its pinned sha256",
		Args:  exactArgs(0, "no arguments"),
		RunE: func(*cobra.Command, []string) error {
			opts.CacheDir = install.CacheDir()
			return runOrHook(runF, runtimeListRun, opts)
		},
	}
	c.Flags().BoolVar(&opts.JSON, "json", false, "print the list as JSON")
	return c
}

func runtimeListRun(opts *RuntimeListOptions) error {
	list, err := install.List(opts.CacheDir)
	if err != nil {
		return err
	}
	if opts.JSON {
		if list == nil {
			list = []install.Cached{}
		}
		return writeJSON(opts.IO.Out, list)
	}
	if len(list) == 0 {
		fmt.Fprintf(opts.IO.Out, "no ONNX Runtime library in %s; run: optc runtime install\n", install.RuntimeDir(opts.CacheDir))
		return nil
	}
	w := tabwriter.NewWriter(opts.IO.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "version\tplatform\tstatus\tbytes\tpath")
	for _, c := range list {
		p := c.Platform
		if p == "" {
			p = "-"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s\n", c.Version, p, c.Status, c.Bytes, c.Path)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	for _, c := range list {
		if c.Detail != "" {
			fmt.Fprintf(opts.IO.Out, "%s: %s\n", c.Path, c.Detail)
		}
	}
	return nil
}
