#!/usr/bin/env bash
# Installs Debian's headless Chromium for the report's browser test, where it is missing.
# Without root or apt the browser test skips itself and says so.
set -u
if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
    || echo "install_chromium: apt-get could not install chromium; browser tests will skip" >&2
else
  echo "install_chromium: not root or no apt-get; browser tests will skip" >&2
fi
exit 0
