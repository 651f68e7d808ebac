#!/usr/bin/env bash
# The browser test (tests/test_serve_browser.py) drives Debian's Chromium through its chromedriver: install both
# when missing (as root, or with passwordless sudo). Quiet; prints the apt log only when it fails.
set -euo pipefail
if command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; then
  exit 0
fi
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo -n"; fi
log=$(mktemp)
if ! { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium chromium-driver; } >"$log" 2>&1; then
  cat "$log" >&2
  echo "error: could not install chromium and chromium-driver (the browser test needs them): install them by hand" >&2
  rm -f "$log"
  exit 1
fi
rm -f "$log"
