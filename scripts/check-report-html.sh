#!/bin/sh
# Checks that report.html renders in headless Chromium with its charts
# visible. Usage: scripts/check-report-html.sh [path/to/report.html]
# (default: a sample report). Needs chromium (Debian: apt-get install -y
# chromium); fails, rather than skips, when it is missing.
set -eu
cd "$(dirname "$0")/.."
if [ $# -gt 0 ]; then
	OPTC_REPORT_HTML=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
	export OPTC_REPORT_HTML
fi
OPTC_REQUIRE_CHROMIUM=1 exec go test -count=1 -run 'TestHTMLRendersInChromium|TestHTMLIsSelfContained' -v ./report
