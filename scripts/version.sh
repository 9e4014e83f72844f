#!/usr/bin/env bash
# optc's version: the one string make build, make install and make release
# link into the binaries (and release.sh names the files and the
# Dockerfile's default with). The tag at HEAD (v*); else the Go
# pseudo-version of HEAD, as `go install ...@COMMIT` would report it
# (v0.0.0-UTCTIME-COMMIT12, or vX.Y.(Z+1)-0.UTCTIME-COMMIT12 after a tag
# vX.Y.Z); +dirty when tracked files have uncommitted changes; v0.0.0-devel
# outside git.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! commit=$(git rev-parse HEAD 2>/dev/null); then
	echo v0.0.0-devel
	exit 0
fi
if ! v=$(git describe --tags --match 'v[0-9]*' --exact-match 2>/dev/null); then
	when=$(TZ=UTC git log -1 --format=%cd --date=format-local:%Y%m%d%H%M%S HEAD)
	v=v0.0.0-$when-${commit:0:12}
	if base=$(git describe --tags --match 'v[0-9]*' --abbrev=0 2>/dev/null) &&
		[[ $base =~ ^v([0-9]+)\.([0-9]+)\.([0-9]+)$ ]]; then
		v=v${BASH_REMATCH[1]}.${BASH_REMATCH[2]}.$((BASH_REMATCH[3] + 1))-0.$when-${commit:0:12}
	fi
fi
[ -z "$(git status --porcelain --untracked-files=no 2>/dev/null)" ] || v=$v+dirty
echo "$v"
