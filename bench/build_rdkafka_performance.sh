#!/usr/bin/env bash
# Build librdkafka's C performance tool (rdkafka_performance) from Debian's source package and put
# it in ~/.cache/moldau-bench/. The consume and produce benchmarks use it when it is there: a C
# client shows the broker's ceiling where a Python loop would show its own. Needs root (apt).
set -euo pipefail
target="${XDG_CACHE_HOME:-$HOME/.cache}/moldau-bench"
mkdir -p "$target"
if ! grep -rqs "deb-src" /etc/apt/sources.list /etc/apt/sources.list.d/; then
    cat > /etc/apt/sources.list.d/debian-src.sources <<'SOURCES'
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SOURCES
fi
apt-get update -qq
apt-get install -y -qq librdkafka-dev dpkg-dev gcc >/dev/null
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
apt-get source -qq librdkafka >/dev/null
cd librdkafka-*/
./configure --disable-ssl --disable-gssapi --disable-zstd --disable-lz4-ext >/dev/null
gcc -O2 -Isrc -o "$target/rdkafka_performance" examples/rdkafka_performance.c -lrdkafka -lm -lpthread
echo "built $target/rdkafka_performance"
