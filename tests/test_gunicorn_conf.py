"""The worker's interpreter tuning, run the way gunicorn runs it: through the
post_worker_init hook of our options, in a fresh interpreter."""

import json
import subprocess
import sys

PROBE = """
import gc, json, sys
from kubectl_nettraffic.config import settings_from_mapping
from webhook.gunicorn_conf import gunicorn_options

before = {"switch": sys.getswitchinterval(), "frozen": gc.get_freeze_count()}
options = gunicorn_options(settings_from_mapping({"server": {"certFile": "/nonexistent/tls.crt", "keyFile": "/nonexistent/tls.key"}}))
options["post_worker_init"](None)  # gunicorn passes the worker; the hook does not use it
after = {"switch": sys.getswitchinterval(), "frozen": gc.get_freeze_count()}
print(json.dumps({"before": before, "after": after}))
"""


def test_the_worker_gets_short_gil_turns_and_frozen_start_up_objects():
    result = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=60, check=True
    )
    seen = json.loads(result.stdout)
    assert seen["before"]["switch"] == 0.005  # CPython's default, so the change is ours
    assert seen["after"]["switch"] == 0.001
    assert seen["before"]["frozen"] == 0
    # Every module object imported so far: tens of thousands, not a handful.
    assert seen["after"]["frozen"] > 10_000
