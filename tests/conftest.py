"""Shared fixtures: real servers, started per test module and always stopped."""

import os
import time
from collections.abc import Iterator

import pytest

from harness.fakeapi import FakeKubeAPI

# The real kubectl and helm that .ci/setup installs into .tools/bin, for a
# run of pytest that did not go through .ci/test (which puts them on PATH).
TOOLS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), ".tools", "bin")
if os.path.isdir(TOOLS) and TOOLS not in os.environ["PATH"].split(os.pathsep):
    os.environ["PATH"] = os.environ["PATH"] + os.pathsep + TOOLS


@pytest.fixture
def fake_api(tmp_path: "os.PathLike[str]") -> Iterator[FakeKubeAPI]:
    api = FakeKubeAPI()
    yield api
    api.stop()


@pytest.fixture
def kubeconfig(fake_api: FakeKubeAPI, tmp_path: "os.PathLike[str]") -> str:
    return fake_api.kubeconfig(os.path.join(str(tmp_path), "kubeconfig"))


def wait_for(condition, timeout: float = 10.0, interval: float = 0.05):  # type: ignore[no-untyped-def]
    """Poll ``condition`` until it returns something truthy; fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"condition not met within {timeout}s")
