#!/usr/bin/env bash
# Refresh the console's vendored browser libraries (moldau/console/static/vendor/) from the npm
# registry: the exact versions below, each file copied out of the package `npm pack` fetches
# (npm checks the registry's integrity hash), with the package's licence beside it. The files
# are committed, so `pip install moldau` alone serves them and no build step needs npm;
# tests/unit/console/test_assets.py checks each file against the digest recorded in
# VENDORED.txt. Run this after changing a version, then commit the directory.
#   htmx.org  the console's live regions (hx-get polling with hx-select)
#   uplot     the lag-over-time chart
set -euo pipefail
cd "$(dirname "$0")/.."
HTMX_VERSION=2.0.11
UPLOT_VERSION=1.6.32
target=moldau/console/static/vendor
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

unpack() {  # unpack NAME VERSION: the package's files under $work/NAME/package
    (cd "$work" && npm pack --silent "$1@$2" >/dev/null)
    mkdir -p "$work/$1"
    tar xzf "$work/$1-$2.tgz" -C "$work/$1"
}
unpack htmx.org "$HTMX_VERSION"
unpack uplot "$UPLOT_VERSION"

rm -rf "$target"
mkdir -p "$target"
cp "$work/htmx.org/package/dist/htmx.min.js" "$target/htmx.min.js"
cp "$work/htmx.org/package/LICENSE" "$target/htmx.LICENSE.txt"
cp "$work/uplot/package/dist/uPlot.iife.min.js" "$target/uPlot.iife.min.js"
cp "$work/uplot/package/dist/uPlot.min.css" "$target/uPlot.min.css"
cp "$work/uplot/package/LICENSE" "$target/uPlot.LICENSE.txt"
{
    echo "# file sha256 npm-package (written by scripts/vendor-console-assets.sh)"
    for file in htmx.min.js htmx.LICENSE.txt; do
        echo "$file $(sha256sum "$target/$file" | cut -d' ' -f1) htmx.org@$HTMX_VERSION"
    done
    for file in uPlot.iife.min.js uPlot.min.css uPlot.LICENSE.txt; do
        echo "$file $(sha256sum "$target/$file" | cut -d' ' -f1) uplot@$UPLOT_VERSION"
    done
} >"$target/VENDORED.txt"
echo "vendor: wrote $target ($(ls "$target" | wc -l) files)"
