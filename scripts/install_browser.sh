#!/usr/bin/env bash
# The browser test (tests/test_serve_browser.py) drives Chromium through its chromedriver. Found (CHROMIUM /
# CHROMEDRIVER, or chromium / chromium-browser / google-chrome and chromedriver on PATH): nothing to do. Missing:
# installed with apt as root or with passwordless sudo (CI is root: it always gets them); otherwise one note says what
# to install and `make test` goes on: the browser tests then skip, saying so, for a user who is not root.
set -euo pipefail
browser="${CHROMIUM:-$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)}"
driver="${CHROMEDRIVER:-$(command -v chromedriver || true)}"
if [ -n "$browser" ] && [ -x "$browser" ] && [ -n "$driver" ] && [ -x "$driver" ]; then
  exit 0
fi
SUDO=""
if [ "$(id -u)" != 0 ]; then
  if ! sudo -n true >/dev/null 2>&1; then
    echo "note: the browser test needs Chromium and chromedriver and this user cannot install them (not root, no" \
         "passwordless sudo): install them (Debian/Ubuntu: apt-get install chromium chromium-driver) or set CHROMIUM" \
         "and CHROMEDRIVER to their paths; until then tests/test_serve_browser.py is skipped" >&2
    exit 0
  fi
  SUDO="sudo -n"
fi
log=$(mktemp)
if ! { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium chromium-driver; } >"$log" 2>&1; then
  cat "$log" >&2
  echo "error: could not install chromium and chromium-driver (the browser test needs them): install them by hand" >&2
  rm -f "$log"
  exit 1
fi
rm -f "$log"
