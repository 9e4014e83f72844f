#!/bin/sh
# Shows that a change to optc's code leaves its artifacts byte for byte
# the same: run it with "record" before the change and "check" after.
#
#   scripts/same-artifacts.sh record DIR   # builds each case once (deciding),
#                                          # replays it, keeps the replay's hashes
#   scripts/same-artifacts.sh check DIR    # replays each case with this optc
#                                          # and compares the hashes
#
# Each case is an optc build with --target all; the replay applies the first
# build's decisions.json, so nothing timed can change what is written. The
# hashes cover every file of the output folder but report.* (which hold
# timings) and ORT's own .ort files, which ORT does not write the same way
# twice (its size and hash are left out of manifest.json too, as is the
# version of optc that wrote it). The cases: the bundled demo (MNIST), the zoo's detector (NMS
# head) and PaddleOCR's direction classifier on rendered text lines
# (make testdata zoo-models first). OPTC names the binary (default bin/optc).
# A replay keeps the placement's own words and the reports are left out, so
# run `go run ./tools/samestrings REV` too: it lists every string literal
# of the Go files that differs from revision REV's (a rename by pattern
# that reached into a message shows there).
set -eu
mode=${1:?usage: same-artifacts.sh record|check DIR}
dir=${2:?usage: same-artifacts.sh record|check DIR}
optc=${OPTC:-bin/optc}
cache=${OPTC_CACHE:-$HOME/.cache/optc}

build() { # case name, output folder, extra flags...
	name=$1 out=$2
	shift 2
	case $name in
	demo) set -- --config testdata/mnist/optc.yaml "$@" ;;
	detector) set -- "$cache/zoo/detector/static.onnx" --int8 --calib-data "$cache/zoo/detector/calib.npy" \
		--eval-data "$cache/zoo/detector/eval.npy" "$@" ;;
	ocr-cls) set -- "$cache/ocr-models/ch_ppocr_mobile_v2.0_cls_infer.onnx" --int8 \
		--calib-data "$cache/textlines/cls_calib.npy" --eval-data "$cache/textlines/cls_images.npy" \
		--eval-labels "$cache/textlines/cls_labels.npy" "$@" ;;
	esac
	"$optc" build "$@" --target all --budget 2m -o "$out" --force >"$out.log" 2>&1 ||
		{ rc=$?; [ $rc -eq 3 ] || { echo "$name: optc build exited $rc (log: $out.log)" >&2; exit 1; }; }
}

hashes() { # folder -> sorted "sha256  path" lines, report.* and .ort left out
	(cd "$1" && find . -type f ! -name 'report.*' ! -name '*.ort' ! -name manifest.json | LC_ALL=C sort | xargs sha256sum)
	sed -e '/"optc_version"/d' -e '/"path": ".*\.ort"/,/"sha256"/{/"bytes"\|"sha256"/d}' "$1/manifest.json" |
		sha256sum | sed 's|-$|./manifest.json (.ort and optc_version aside)|'
}

mkdir -p "$dir"
status=0
for name in demo detector ocr-cls; do
	if [ "$mode" = record ]; then
		build "$name" "$dir/$name.decided"
	fi
	[ -f "$dir/$name.decided/decisions.json" ] || { echo "$name: no $dir/$name.decided (record first)" >&2; exit 1; }
	build "$name" "$dir/$name.replay" --replay "$dir/$name.decided/decisions.json"
	hashes "$dir/$name.replay" >"$dir/$name.$mode.sha256"
	if [ "$mode" = check ]; then
		if diff "$dir/$name.record.sha256" "$dir/$name.check.sha256" >"$dir/$name.diff"; then
			echo "$name: same bytes ($(wc -l <"$dir/$name.check.sha256") files)"
		else
			echo "$name: DIFFERENT:"; cat "$dir/$name.diff"; status=1
		fi
	else
		echo "$name: recorded $(wc -l <"$dir/$name.record.sha256") files"
	fi
done
exit $status
