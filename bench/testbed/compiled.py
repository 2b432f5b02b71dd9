"""The testbed's C helpers, built with gcc into a run's work directory on
first use (the Python versions cost a shared 2-core machine too much CPU)."""

import os
import subprocess

HERE = os.path.dirname(__file__)


def compiled(source: str, workdir: str) -> str:
    """The binary of ``source`` (a file beside this one), built once per ``workdir``."""
    binary = os.path.join(workdir, os.path.splitext(source)[0])
    if not os.path.exists(binary):
        subprocess.run(
            ["gcc", "-O2", "-Wall", "-o", binary, os.path.join(HERE, source)], check=True
        )
    return binary
