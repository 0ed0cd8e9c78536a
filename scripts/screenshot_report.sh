#!/usr/bin/env bash
# Screenshot a PFR HTML report in headless Chromium (Debian's `chromium`; `apt-get install -y chromium`).
#   scripts/screenshot_report.sh REPORT.html OUT.png [WIDTH,HEIGHT]
# The report is self-contained, so Chromium runs with networking features off and a throwaway profile.
set -euo pipefail
if [[ $# -lt 2 ]]; then
  echo "usage: $0 REPORT.html OUT.png [WIDTH,HEIGHT]" >&2
  exit 2
fi
report=$(realpath "$1")
out=$(realpath -m "$2")
size=${3:-1400,2400}
browser=${CHROMIUM:-$(command -v chromium || command -v chromium-browser || true)}
if [[ -z "$browser" ]]; then
  echo "$0: chromium not found (apt-get install -y chromium, or set CHROMIUM=/path/to/chrome)" >&2
  exit 2
fi
profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT
"$browser" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
  --disable-background-networking --disable-component-update --disable-sync \
  --user-data-dir="$profile" --hide-scrollbars --screenshot="$out" --window-size="$size" \
  "file://$report" 2>/dev/null
test -s "$out"
echo "$out"
