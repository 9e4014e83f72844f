#!/usr/bin/env bash
# Fetches the ONNX Runtime 1.24.1 CPU library into the optc cache folder
# ($OPTC_CACHE, default ~/.cache/optc) from the official npm package
# onnxruntime-node, without running its install script (which downloads
# GPU providers from a host outside the npm registry). Checks sha256 of the
# tarball and the library; does nothing when the library is already there.
set -euo pipefail

version=1.24.1
tgz_sum=57181cf6e6e711b155c5b942d591fd63ded0b5de5c4922d51fd994e7f6ac2772
lib_sum=53ef1ac028dd1b05554b8da28d9159eb3876f99868193d2aaa6e67f0243c23d4

cache=${OPTC_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/optc}
dest=$cache/onnxruntime/$version
lib=$dest/libonnxruntime.so.1

if [ -f "$lib" ] && [ "$(sha256sum "$lib" | cut -d' ' -f1)" = "$lib_sum" ]; then
	echo "$lib"
	exit 0
fi
case "$(uname -s)-$(uname -m)" in
Linux-x86_64) ;;
*) echo "fetch-onnxruntime: only linux x86-64 is provided by this script" >&2; exit 1 ;;
esac

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "fetching onnxruntime-node@$version" >&2
tgz=$(cd "$work" && npm pack --silent "onnxruntime-node@$version")
got=$(sha256sum "$work/$tgz" | cut -d' ' -f1)
[ "$got" = "$tgz_sum" ] || { echo "fetch-onnxruntime: $tgz: sha256 $got, want $tgz_sum" >&2; exit 1; }
tar -xzf "$work/$tgz" -C "$work" package/bin/napi-v6/linux/x64/libonnxruntime.so.1
got=$(sha256sum "$work/package/bin/napi-v6/linux/x64/libonnxruntime.so.1" | cut -d' ' -f1)
[ "$got" = "$lib_sum" ] || { echo "fetch-onnxruntime: library sha256 $got, want $lib_sum" >&2; exit 1; }
mkdir -p "$dest"
mv "$work/package/bin/napi-v6/linux/x64/libonnxruntime.so.1" "$lib.tmp"
mv "$lib.tmp" "$lib"
echo "$lib"
