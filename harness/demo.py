"""The whole pipeline on one machine, no cluster needed.

A real Prometheus scrapes live node_exporter-shaped traffic for eight
simulated nodes on 127.0.0.1; certs come from our own tooling; the webhook
runs under gunicorn over TLS; sample pods are posted to /mutate over HTTPS
as the API server would, and each pod's preferred nodes are printed.

Run it with ``bash .ci/demo`` (which installs what is missing first).
"""

import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any

import jsonpatch
import requests

from harness.exporter import LiveExporter
from harness.fakeapi import node
from harness.prometheus import Device, Exporter, PrometheusServer
from harness.reviews import pod, review
from harness.webhook import WebhookProcess

MB = 1e6
GBIT = 1.25e8
# name: (receive, transmit, link speed, labels)
NODES = {
    "worker-a1": (2 * MB, 1 * MB, 10 * GBIT, {"zone": "a"}),
    "worker-a2": (96 * MB, 20 * MB, GBIT, {"zone": "a"}),  # saturated by a data pull
    "worker-a3": (15 * MB, 5 * MB, 10 * GBIT, {"zone": "a"}),
    "worker-b1": (4 * MB, 3 * MB, 10 * GBIT, {"zone": "b"}),
    "worker-b2": (60 * MB, 40 * MB, 10 * GBIT, {"zone": "b"}),
    "worker-b3": (0.5 * MB, 0.2 * MB, 10 * GBIT, {"zone": "b"}),
    "gpu-1": (0.1 * MB, 0.1 * MB, 10 * GBIT, {"zone": "b", "gpu": "true"}),
    "worker-c1": (8 * MB, 8 * MB, 10 * GBIT, {"zone": "c"}),
}


def _term_weights(patched: dict) -> dict[str, int]:
    """node -> the weight of the pod's one-node preferred term on it."""
    affinity = (patched["spec"].get("affinity") or {}).get("nodeAffinity") or {}
    return {
        term["preference"]["matchFields"][0]["values"][0]: term["weight"]
        for term in affinity.get("preferredDuringSchedulingIgnoredDuringExecution") or []
        if term["preference"].get("matchFields") and not term["preference"].get("matchExpressions")
    }


def step(text: str) -> None:
    print(f"\n\x1b[1m==> {text}\x1b[0m" if sys.stdout.isatty() else f"\n==> {text}", flush=True)


def _live_prometheus() -> tuple[LiveExporter, PrometheusServer]:
    exporters = [
        Exporter(
            f"10.0.0.{i}:9100",
            name,
            [Device("eth0", rx, tx, speed=speed), Device("veth1a2b", 5 * MB, 5 * MB)],
        )
        for i, (name, (rx, tx, speed, _)) in enumerate(NODES.items(), start=1)
    ]
    exporter = LiveExporter(exporters)
    try:
        prometheus = PrometheusServer(scrape_targets=[exporter.target], scrape_interval="1s")
    except BaseException:
        exporter.stop()
        raise
    print(f"Prometheus {prometheus.url} scraping {exporter.target}")
    return exporter, prometheus


def _write_config(workdir: str, prometheus_url: str) -> tuple[dict[str, object], str]:
    """The nodes (one tainted for GPUs) and the webhook's config: (config, its path)."""
    nodes_file = os.path.join(workdir, "nodes.json")
    items = [node(name, labels=labels) for name, (_, _, _, labels) in NODES.items()]
    items[6]["spec"]["taints"] = [
        {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
    ]
    with open(nodes_file, "w") as handle:
        json.dump({"apiVersion": "v1", "kind": "List", "items": items}, handle)
    config: dict[str, object] = {
        "prometheus": {"url": prometheus_url, "window": "10s"},
        "metricsServer": {"enabled": False},
        "nodes": {"file": nodes_file},
        "refresh": {"interval": "2s", "maxStaleness": "1m"},
    }
    config_path = os.path.join(workdir, "config.yaml")
    with open(config_path, "w") as handle:
        json.dump(config, handle)  # JSON is YAML
    return config, config_path


def _issue_certs(plugin: str, workdir: str) -> str:
    cert_dir = os.path.join(workdir, "tls")
    subprocess.run(
        [
            plugin,
            "certs",
            "create",
            "--out-dir",
            cert_dir,
            "--extra-san",
            "127.0.0.1",
            "--extra-san",
            "localhost",
        ],
        check=True,
    )
    return cert_dir


def _wait_for_window(prometheus_url: str) -> None:
    deadline = time.monotonic() + 90
    query = "min(count_over_time(node_uname_info[10s])) >= 10"
    while not requests.get(
        f"{prometheus_url}/api/v1/query", params={"query": query}, timeout=5
    ).json()["data"]["result"]:
        if time.monotonic() > deadline:
            raise RuntimeError("Prometheus collected no samples in 90s")
        time.sleep(0.5)


def _samples() -> list[tuple[str, dict[str, Any]]]:
    """The sample pods, by the label the demo prints."""
    return [
        *[(f"web-7d9c4b-{i}", pod()) for i in range(4)],
        (
            "ingest-0 (expects 50Mi/s)",
            pod(
                name="ingest-0",
                owner_kind="StatefulSet",
                annotations={"nettraffic.io/expected-bandwidth": "50Mi"},
            ),
        ),
        *[(f"web-7d9c4b-{i}", pod()) for i in range(4, 6)],
        ("zone-b only", pod(spec={"nodeSelector": {"zone": "b"}})),
        (
            "gpu job (tolerates the taint)",
            pod(spec={"tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}]}),
        ),
        ("node-exporter (DaemonSet)", pod(owner_kind="DaemonSet")),
    ]


def _admit_samples(webhook: WebhookProcess) -> set[str]:
    """Each sample pod through /mutate, what it was given printed: the first choices."""
    samples = _samples()
    width = max(len(label) for label, _ in samples)
    first_choices: set[str] = set()
    for label, obj in samples:
        answer = webhook.post("/mutate", review(obj)).json()["response"]
        if "patch" not in answer:
            print(f"{label.ljust(width)}  not steered (never touched)")
            continue
        patched = jsonpatch.apply_patch(obj, json.loads(base64.b64decode(answer["patch"])))
        annotations = patched["metadata"]["annotations"]
        if "nettraffic.io/preferred-nodes" not in annotations:
            print(f"{label.ljust(width)}  skipped: {annotations.get('nettraffic.io/skipped')}")
            continue
        first_choices.add(annotations["nettraffic.io/preferred-nodes"].split(",")[0])
        weights = _term_weights(patched)
        scores = annotations["nettraffic.io/scores"].split(",")
        shown = ", ".join(
            f"{entry} (weight {weights.get(entry.split('=')[0], 'none')})" for entry in scores
        )
        what = "prefers" if weights else "no term, nothing to gain; ranked"
        print(f"{label.ljust(width)}  {what} {shown}")
    return first_choices


def _show_scores(webhook: WebhookProcess, first_choices: set[str]) -> None:
    scores = webhook.session.get(webhook.url + "/scores").json()
    for row in scores["nodes"][:5]:
        print(f"{row['name']:<10} score {row['score']:>3}  in-flight pods {row['inflightPods']}")
    busiest = sorted(NODES, key=lambda name: NODES[name][0] + NODES[name][1], reverse=True)[:2]
    chosen_busy = [name for name in busiest if name in first_choices]
    verdict = (
        f"chosen first for: {', '.join(chosen_busy)}" if chosen_busy else "never a first choice"
    )
    print(f"\nFirst choices: {', '.join(sorted(first_choices))}.")
    print(f"The two busiest nodes ({', '.join(busiest)}) were {verdict}.")


def main() -> int:
    workdir = tempfile.mkdtemp(prefix="nettraffic-demo-")
    exporter = prometheus = webhook = None
    try:
        step("Live node_exporter traffic for 8 nodes, scraped by a real Prometheus on 127.0.0.1")
        exporter, prometheus = _live_prometheus()
        config, config_path = _write_config(workdir, prometheus.url)

        step("TLS from our own cert tooling: kubectl nettraffic certs create --out-dir")
        plugin = shutil.which("kubectl-nettraffic") or "kubectl-nettraffic"
        cert_dir = _issue_certs(plugin, workdir)

        step("Waiting for a full 10s rate window of samples")
        _wait_for_window(prometheus.url)

        step("The webhook: nettraffic-webhook under gunicorn over TLS")
        webhook = WebhookProcess(config, cert_dir=cert_dir)
        print(f"webhook {webhook.url} ready")

        step("kubectl nettraffic top --source prometheus (the same engine, computed locally)")
        kubectl = shutil.which("kubectl")
        command = [kubectl, "nettraffic"] if kubectl else [plugin]
        subprocess.run(
            [*command, "top", "--source", "prometheus", "--config", config_path, "-o", "wide"],
            check=True,
        )

        step("Sample pods posted to POST /mutate as AdmissionReview v1 over HTTPS")
        first_choices = _admit_samples(webhook)

        step("Live scores with the in-flight pods booked (GET /scores)")
        _show_scores(webhook, first_choices)
        return 0
    finally:
        for part in (webhook, prometheus, exporter):
            if part is not None:
                part.stop()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
