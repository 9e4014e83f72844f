#!/usr/bin/env bash
# make release: optc binaries for linux/amd64 and linux/arm64 with cgo on
# (the other architecture cross-compiled with Debian's gcc for it), named
# optc-VERSION-linux-ARCH, their SHA256SUMS and the container recipe
# (scripts/Dockerfile), written to $DIST (default dist/) as a whole: a
# failed build leaves the previous dist/ untouched.
#
# VERSION defaults to scripts/version.sh's (the tag at HEAD, else HEAD's Go
# pseudo-version); it must be a semantic version. The copied Dockerfile
# takes it as its VERSION default. The commit and whether the tree had uncommitted changes
# are linked in too, as the go command records no vcs information from a git
# worktree. -trimpath and the fixed flags make the build reproducible: two
# builds of one commit gave the same SHA256SUMS. Installs the cross
# compiler with apt when it is missing (as root, or with sudo), saying so
# first; RELEASE_NO_INSTALL=1 stops instead.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}

version=${VERSION:-$(scripts/version.sh)}
semver='^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$'
if ! [[ $version =~ $semver ]]; then
	echo "release: VERSION=$version is not a semantic version (vMAJOR.MINOR.PATCH[-pre][+build])" >&2
	exit 2
fi
commit=$(git rev-parse HEAD)
modified=false
[ -z "$(git status --porcelain --untracked-files=no)" ] || modified=true
out=${DIST:-dist}

# The C compiler for each architecture: the host's gcc for its own, the
# Debian cross gcc for the other.
host=$($GO env GOHOSTARCH)
declare -A gnu=([amd64]=x86_64-linux-gnu [arm64]=aarch64-linux-gnu)
declare -A pkg=([amd64]=gcc-x86-64-linux-gnu [arm64]="gcc-aarch64-linux-gnu libc6-dev-arm64-cross")
cc_for() { if [ "$1" = "$host" ]; then echo "${CC:-gcc}"; else echo "${gnu[$1]}-gcc"; fi; }
missing=()
for arch in amd64 arm64; do
	command -v "$(cc_for $arch)" >/dev/null || missing+=("${pkg[$arch]}")
done
if [ ${#missing[@]} -gt 0 ]; then
	echo "release: the cross compiler is missing: installing ${missing[*]} with apt-get (about 160 MB with their dependencies); RELEASE_NO_INSTALL=1 stops here instead" >&2
	if [ -n "${RELEASE_NO_INSTALL:-}" ]; then
		echo "release: not installing (RELEASE_NO_INSTALL is set): install ${missing[*]}, then run make release again" >&2
		exit 1
	fi
fi
for arch in amd64 arm64; do
	cc=$(cc_for $arch)
	command -v "$cc" >/dev/null && continue
	echo "release: installing ${pkg[$arch]} for $cc" >&2
	sudo=; [ "$(id -u)" = 0 ] || sudo=sudo
	export DEBIAN_FRONTEND=noninteractive
	# shellcheck disable=SC2086
	$sudo apt-get install -y --no-install-recommends ${pkg[$arch]} >&2 ||
		{ $sudo apt-get update -qq && $sudo apt-get install -y --no-install-recommends ${pkg[$arch]} >&2; }
done

tmp=$(mktemp -d "${out%/}.tmp-XXXXXX")
chmod 755 "$tmp"
trap 'rm -rf "$tmp"' EXIT
p=github.com/optc-dev/optc/cmd
ldflags="-s -w -X $p.Version=$version -X $p.Commit=$commit -X $p.Modified=$modified"
for arch in amd64 arm64; do
	bin=optc-$version-linux-$arch
	echo "release: $bin (CC=$(cc_for $arch))" >&2
	CGO_ENABLED=1 GOOS=linux GOARCH=$arch CC=$(cc_for $arch) \
		$GO build -trimpath -buildvcs=false -ldflags "$ldflags" -o "$tmp/$bin" ./cmd/optc
done
sed "s/^ARG VERSION$/ARG VERSION=$version/" scripts/Dockerfile >"$tmp/Dockerfile"
(cd "$tmp" && sha256sum optc-* >SHA256SUMS)
rm -rf "$out"
mv "$tmp" "$out"
trap - EXIT
cat "$out/SHA256SUMS"
