"""Run one in-process fuzz target under atheris (libFuzzer, coverage-guided):

    python -m tests.fuzz.run TARGET [libFuzzer flags] [corpus directories]
    python -m tests.fuzz.run frames -runs=100000 -seed=1 /tmp/frames tests/fuzz/corpus/requests

TARGET is `frames` (framing, request header, shape check, kio decode), `records` (the
record-batch validator, decoder and decompression caps), `handlers` (every handler through the
dispatcher of an embedded node) or `sasl` (SaslHandshake, SaslAuthenticate and bare tokens
through the dispatcher and the broker's SASL sessions). libFuzzer writes the inputs it finds interesting into the first
corpus directory: give it a scratch one before the committed seeds. A failing input is written to
`-artifact_prefix` (default: the working directory) as crash-<sha1>; replay it with
`python -m tests.fuzz.run TARGET crash-<sha1>`.

Only Moldau's own modules are instrumented, so they must not be imported before this module
imports the target (hence no `moldau` import here).
"""

from __future__ import annotations

import importlib
import sys

TARGETS = {
    "frames": "tests.fuzz.fuzz_frames",
    "records": "tests.fuzz.fuzz_records",
    "handlers": "tests.fuzz.fuzz_handlers",
    "sasl": "tests.fuzz.fuzz_sasl",
}


def main(argv: list[str]) -> None:
    if len(argv) < 2 or argv[1] not in TARGETS:
        sys.exit(f"usage: python -m tests.fuzz.run {{{','.join(TARGETS)}}} [libFuzzer flags]")
    import atheris

    with atheris.instrument_imports(include=["moldau"]):
        module = importlib.import_module(TARGETS[argv[1]])
    setup = getattr(module, "setup", None)
    if setup is not None:
        setup()
    atheris.Setup([argv[0], *argv[2:]], module.test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main(sys.argv)
