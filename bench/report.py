"""Writes one benchmark's section into docs/benchmarks.md, keeping the others.

Each section sits between ``<!-- bench:NAME -->`` markers, so benchmarks can
be rerun one at a time and the file stays in a stable order.
"""

import argparse
import os
import platform
import random
import sys
import time
from collections.abc import Sequence

PATH = os.path.join("docs", "benchmarks.md")
HEADER = """# Benchmarks

Every figure here was measured by the command above its table, on the
project's 2-core machine, and is rewritten when that command runs again.
Compare ratios within one table: the machines are shared and noisy.
"""


def bench_parser(description: str | None) -> argparse.ArgumentParser:
    """The command line every benchmark shares: its docstring as help, and --no-write."""
    parser = argparse.ArgumentParser(
        description=description, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--no-write", action="store_true", help="print only; leave docs/ alone")
    return parser


def drawn_seed(given: int | None) -> int:
    """The first draw's seed: ``given`` (``--seed``), or drawn anew."""
    return given if given is not None else random.SystemRandom().randrange(10**8)


def rerun_command(module: str, argv: Sequence[str] | None, given: int | None, seed: int) -> str:
    """The command that reruns these draws: ``argv`` (None: this process's
    arguments) with the drawn seed added when none was given."""
    argv = list(sys.argv[1:] if argv is None else argv)
    arguments = argv if given is not None else [*argv, "--seed", str(seed)]
    return f"python -m {module}" + " ".join(["", *arguments]).rstrip()


def write_section(name: str, title: str, command: str, body: str) -> None:
    start, end = f"<!-- bench:{name} -->", f"<!-- /bench:{name} -->"
    text = HEADER
    if os.path.exists(PATH):
        with open(PATH) as handle:
            text = handle.read()
    stamp = f"{time.strftime('%Y-%m-%d')}, {platform.python_implementation()} {platform.python_version()}, {os.cpu_count()} cores"
    section = f"{start}\n## {title}\n\n`{command}` ({stamp})\n\n{body}\n{end}"
    if start in text and end in text:
        before, rest = text.split(start, 1)
        after = rest.split(end, 1)[1]
        text = before + section + after
    else:
        text = text.rstrip() + "\n\n" + section + "\n"
    os.makedirs(os.path.dirname(PATH), exist_ok=True)
    with open(PATH, "w") as handle:
        handle.write(text)
