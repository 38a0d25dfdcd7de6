#!/usr/bin/env bash
# Install everything Moldau's example and test suite need. Safe to run again: each step is skipped
# when its result is already in place.
#   - .venv with Python 3.11, the exact packages of requirements.lock (moldau[test,spark]'s
#     dependencies with hashes; scripts/lock.sh refreshes it) and moldau itself, editable
#   - kcat (Debian package) if it is not on PATH
#   - a C compiler (Debian package gcc) if none is on PATH: the chaos suite's clock jumps build
#     tests/chaos/wall_clock_offset.c
#   - kafkajs and its codecs under tests/integration/js (from package-lock.json)
#   - Java 17 and Maven (Debian packages) if missing, and Apache Kafka's JVM clients and tools
#     (tests/java/pom.xml, exact versions) from Maven Central into tests/java/lib/<version>/
#   - Spark's Kafka connector for the pinned PySpark (tests/java/spark-kafka/pom.xml) from Maven
#     Central into tests/java/spark-kafka/lib/
#   - Kafka Connect with the FileStream and Debezium PostgreSQL connectors (tests/java/connect/
#     pom.xml) into tests/java/lib/connect/, and PostgreSQL (Debian package) if missing
#   - Chromium (Debian package chromium) if missing: the web console's browser tests drive it
#     with Playwright (never Playwright's own browser downloads)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)

log() { printf 'setup: %s\n' "$*"; }

# apt_install PACKAGE...: Debian packages, through sudo unless run as root.
apt_install() {
    local sudo=""
    if [ "$(id -u)" != 0 ]; then sudo="sudo"; fi
    $sudo apt-get update -q
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q "$@"
}

find_python() {
    for candidate in "${PYTHON:-}" python3.11 python3; do
        [ -n "$candidate" ] || continue
        if command -v "$candidate" >/dev/null 2>&1 \
            && "$candidate" -c 'import sys; sys.exit(sys.version_info[:2] < (3, 11))' 2>/dev/null; then
            echo "$candidate"
            return 0
        fi
    done
    echo "setup: Python 3.11 or newer is required (set PYTHON=/path/to/python3.11)" >&2
    return 1
}

# 1. Python virtualenv: the locked versions of moldau[test,spark]'s dependencies, then the package
#    itself (editable, no dependencies of its own to resolve).
if [ ! -x .venv/bin/python ]; then
    PYTHON_BIN=$(find_python)
    log "creating .venv with $PYTHON_BIN"
    "$PYTHON_BIN" -m venv .venv
fi
scripts/lock.sh --check
stamp=.venv/.moldau-install-stamp
wanted=$(cat pyproject.toml requirements.lock | sha256sum | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$wanted" ] \
    || ! .venv/bin/python -c 'import moldau' >/dev/null 2>&1; then
    log "installing requirements.lock and moldau into .venv"
    .venv/bin/python -m pip install --quiet --disable-pip-version-check --require-hashes \
        -r requirements.lock
    .venv/bin/python -m pip install --quiet --disable-pip-version-check --no-deps -e .
    echo "$wanted" >"$stamp"
else
    log ".venv is up to date"
fi

# 2. kcat, the command-line Kafka client used by the integration tests.
if ! command -v kcat >/dev/null 2>&1; then
    log "installing kcat"
    apt_install kcat
else
    log "kcat is installed"
fi

# 3. A C compiler: the chaos suite's wall-clock jumps build tests/chaos/wall_clock_offset.c and
#    preload it into each node.
if ! command -v cc >/dev/null 2>&1 && ! command -v gcc >/dev/null 2>&1 \
    && ! command -v clang >/dev/null 2>&1; then
    log "installing gcc"
    apt_install gcc libc6-dev
else
    log "a C compiler is installed"
fi

# 4. kafkajs for the Node.js integration tests.
if ! command -v npm >/dev/null 2>&1; then
    echo "setup: npm (Node.js 20) is required for the kafkajs tests" >&2
    exit 1
fi
js=tests/integration/js
js_stamp=$js/node_modules/.moldau-install-stamp
js_wanted=$(cat $js/package.json $js/package-lock.json | sha256sum | cut -d' ' -f1)
if [ ! -f "$js_stamp" ] || [ "$(cat "$js_stamp")" != "$js_wanted" ]; then
    log "installing kafkajs into $js"
    (cd "$js" && npm ci --no-audit --no-fund --loglevel=error)
    echo "$js_wanted" >"$js_stamp"
else
    log "kafkajs is installed"
fi

# 5. Apache Kafka's Java client and tools (tests/java/pom.xml) from Maven Central: the 4.1 line
#    for every JVM test, the newest release for the Java client's own tests.
KAFKA_JVM_VERSIONS="4.1.1 4.4.0"
if ! command -v java >/dev/null 2>&1 || ! command -v mvn >/dev/null 2>&1; then
    log "installing Java 17 and Maven"
    apt_install openjdk-17-jdk-headless maven
fi
java_stamp=tests/java/lib/.moldau-install-stamp
java_wanted=$( (cat tests/java/pom.xml; echo "$KAFKA_JVM_VERSIONS") | sha256sum | cut -d' ' -f1)
if [ ! -f "$java_stamp" ] || [ "$(cat "$java_stamp")" != "$java_wanted" ]; then
    rm -rf tests/java/lib
    for version in $KAFKA_JVM_VERSIONS; do
        log "resolving Apache Kafka $version's JVM clients and tools (Maven Central)"
        mvn -B -q -f tests/java/pom.xml dependency:copy-dependencies -Dkafka.version="$version"
    done
    echo "$java_wanted" >"$java_stamp"
else
    log "Kafka's JVM clients and tools are resolved"
fi

# 6. Spark's own Kafka connector (format("kafka"), tests/java/spark-kafka/pom.xml) from Maven
#    Central, run against Moldau beside format("moldau"). Java and Maven come from step 5.
spark_kafka=tests/java/spark-kafka
spark_kafka_stamp=$spark_kafka/lib/.moldau-install-stamp
spark_kafka_wanted=$(sha256sum "$spark_kafka/pom.xml" | cut -d' ' -f1)
if [ ! -f "$spark_kafka_stamp" ] || [ "$(cat "$spark_kafka_stamp")" != "$spark_kafka_wanted" ]; then
    rm -rf "$spark_kafka/lib"
    log "resolving Spark's Kafka connector (Maven Central)"
    mvn -B -q -f "$spark_kafka/pom.xml" dependency:copy-dependencies
    echo "$spark_kafka_wanted" >"$spark_kafka_stamp"
else
    log "Spark's Kafka connector is resolved"
fi

# 7. Kafka Connect 4.1.1 and the connectors its tests run (tests/java/connect/pom.xml: the worker's
#    classpath and one plugin directory per connector, Debezium's PostgreSQL connector among them)
#    into tests/java/lib/connect/, and PostgreSQL (Debian package) for Debezium to capture from.
connect_stamp=tests/java/lib/connect/.moldau-install-stamp
connect_wanted=$(sha256sum tests/java/connect/pom.xml | cut -d' ' -f1)
if [ ! -f "$connect_stamp" ] || [ "$(cat "$connect_stamp")" != "$connect_wanted" ]; then
    rm -rf tests/java/lib/connect
    for part in worker file debezium-postgres; do
        log "resolving Kafka Connect: the $part profile of tests/java/connect/pom.xml (Maven Central)"
        mvn -B -q -f tests/java/connect/pom.xml dependency:copy-dependencies -P "$part"
    done
    echo "$connect_wanted" >"$connect_stamp"
else
    log "Kafka Connect and its connectors are resolved"
fi
if ! compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null; then
    log "installing PostgreSQL"
    apt_install postgresql
else
    log "PostgreSQL is installed"
fi

# 8. Chromium, the headless browser the web console's tests drive (tests/integration/
#    test_console_browser.py), from Debian: Playwright (the test extra) talks to it directly.
if ! command -v chromium >/dev/null 2>&1; then
    log "installing Chromium"
    apt_install chromium
else
    log "Chromium is installed"
fi

log "done ($ROOT)"
