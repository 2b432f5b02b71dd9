"""wrk against the webhook's /mutate: its Lua script (a fixed body, paced
or not, the latency histogram dumped), one run parsed, and percentiles of
the pooled histograms."""

import json
import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass

# wrk hands done() its latency histogram: latency(i) is the i-th distinct
# latency in microseconds and how many requests took it.
DUMP_HISTOGRAM = """
function done(summary, latency, requests)
  local out = io.open(os.getenv("NT_HISTOGRAM"), "w")
  for i = 1, #latency do
    local value, count = latency(i)
    out:write(value, " ", count, "\\n")
  end
  out:close()
end
"""


def wrk_script(directory: str, paced: bool, body: dict[str, object], name: str) -> str:
    body_path = os.path.join(directory, f"{name}.json")
    with open(body_path, "w") as handle:
        json.dump(body, handle)
    script = os.path.join(directory, f"{name}-{'paced' if paced else 'post'}.lua")
    with open(script, "w") as handle:
        handle.write(
            f'local f = io.open("{body_path}", "r")\nwrk.body = f:read("*a")\nf:close()\n'
            'wrk.method = "POST"\nwrk.headers["Content-Type"] = "application/json"\n'
        )
        if paced:
            handle.write("function delay()\n  return 9\nend\n")
        handle.write(DUMP_HISTOGRAM)
    return script


@dataclass
class Run:
    rate: float
    non_2xx: int
    latency_us: Counter[int]
    unanswered: int = 0  # with a timeout given: wrk's timeouts and socket errors


def wrk_missing() -> bool:
    """Whether wrk is missing (and the fix is printed)."""
    if shutil.which("wrk") is None:
        print("wrk is not installed: apt-get install wrk (or run bash .ci/setup)", file=sys.stderr)
        return True
    return False


def run_wrk(
    url: str,
    script: str,
    connections: int,
    histogram: str,
    duration: int,
    timeout: float | None = None,
) -> Run:
    """One wrk run against /mutate. Socket errors fail it; with a ``timeout``
    (a server expected to misbehave) they are counted instead, with the
    requests not answered within it."""
    limit = [f"--timeout={timeout:g}s"] if timeout is not None else []
    result = subprocess.run(
        ["wrk", "-t2", f"-c{connections}", f"-d{duration}s", *limit, "-s", script, url + "/mutate"],
        capture_output=True,
        text=True,
        timeout=duration + 60,
        env={**os.environ, "NT_HISTOGRAM": histogram},
    )
    out = result.stdout
    rate = re.search(r"Requests/sec:\s+([\d.]+)", out)
    socket_errors = re.search(
        r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out
    )
    unanswered = sum(int(n) for n in socket_errors.groups()) if socket_errors else 0
    if result.returncode != 0 or rate is None or (unanswered and timeout is None):
        raise RuntimeError(f"wrk failed against {url}: {out}{result.stderr}")
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    latency: Counter[int] = Counter()
    with open(histogram) as handle:
        for line in handle:
            value, count = line.split()
            latency[int(float(value))] += int(float(count))
    return Run(float(rate.group(1)), int(errors.group(1)) if errors else 0, latency, unanswered)


def percentile_ms(latency: Counter[int], fraction: float) -> float:
    """The smallest latency at or below which ``fraction`` of requests finished."""
    total, seen = sum(latency.values()), 0
    for value in sorted(latency):
        seen += latency[value]
        if seen >= fraction * total:
            return value / 1000
    return float("nan")
