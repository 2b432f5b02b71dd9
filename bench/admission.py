"""Admission latency and throughput through gunicorn over TLS with keep-alive,
for 100 and 5,000 nodes, beside a bare flask app under the same gunicorn and
TLS settings that returns a fixed patch (the ceiling of this stack).

    python -m bench.admission

One webhook per path a real cluster's admissions take, each in a section of
its own: started for it, measured beside the bare apps in the same rounds,
stopped after (a replica's refreshes at 5,000 nodes, its refresher's CPU
and Prometheus's answer, would otherwise land on the rounds of the servers
measured beside it, where no production replica shares its machine with
two others):
- "known": pods whose bandwidth is known (annotated here; a learned
  workload's figure takes the same path);
- "unlearned burst": pods of one workload nothing is learned of, booked at
  the default, its burst spreading (every pod of a cluster without learning,
  and every new Deployment's burst);
- "1 of 3 replicas": the same pods admitted by one of three replicas: it
  reads nodes, namespaces and steered pods from an API server (the fake one,
  over HTTP), and the other two replicas' pods arrive through its binding
  watch, a few every second, so the replica share is on throughout. One of
  the other two holds the tier labels' Lease (the product's LeaseElection,
  in this process), as it does for two replicas of three;
- "1 of 3 replicas, leading" (5,000 nodes only): the same, but this replica
  holds the Lease and writes its first tier labels while it is measured:
  every node's, paced at tierLabels.writesPerSecond (20/s), about 250 s at
  5,000 nodes, the length of the section; the writes made during its rounds
  are reported. At 100 nodes that pass ends in 5 s, before the first round.

Load comes from wrk (keep-alive, 2 threads) on the same 2-core machine:
- "light": 2 connections, each waiting 9 ms after every answer (about 200
  admissions/s): the latency floor of each server on this machine;
- "paced": 10 connections, each waiting 9 ms after every answer, which offers
  about 1,000 admissions/s while latency stays small (wrk has no open-loop
  mode; the achieved rate is reported);
- "saturation": 16 connections as fast as the server answers.

Every check also gives the bare app's own figure under the same load: where
the bare app misses a latency target too, the stack on this machine does,
whatever the webhook adds. The goals are against the bare flask app (issue
41). The webhook answers the API server's admissions beneath flask
(webhook/mutate.py), so a bare WSGI callable under the same stack runs
beside them too: against it, the ratios show what the webhook's own work
costs (reported, no goal).

The machine is shared and noisy, so the servers take turns: several
short rounds, each running every load against every server, the order
swapped every round. Throughput ratios are taken within a round (median over
rounds); latency percentiles come from every request of every round, pooled
from wrk's full latency histograms.
"""

import json
import os
import re
import statistics
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import NamedTuple

import gunicorn

from bench.admission_servers import OtherReplicas, ServerProcess
from bench.fixtures import config, node_list, node_names, prometheus_for, write_node_file
from bench.process_cpu import cpu_seconds, pin_to_one_cpu
from bench.report import bench_parser, write_section
from bench.wrk import Run, percentile_ms, run_wrk, wrk_missing, wrk_script
from harness.fakeapi import FakeKubeAPI
from harness.reviews import pod, review
from harness.webhook import WebhookProcess, make_certs
from kubectl_nettraffic.config import ServerSettings, TierLabelSettings
from kubectl_nettraffic.kube.pods import (
    EXPECTED_BANDWIDTH,
)

DURATION = int(os.environ.get("NT_BENCH_SECONDS", "6"))
ROUNDS = int(os.environ.get("NT_BENCH_ROUNDS", "5"))
PIN = os.environ.get("NT_BENCH_PIN") == "1"  # each server on one CPU; see the docstring
SERVERS = ("bare", "bare-wsgi", "known", "unlearned", "replica", "leader")
WEBHOOKS = SERVERS[2:]
LABELS = {
    "bare": "bare flask app, fixed patch",
    "bare-wsgi": "bare WSGI callable, fixed patch (no flask)",
    "known": "webhook, pods of a known workload",
    "unlearned": "webhook, a burst of one unlearned workload",
    "replica": "webhook, 1 of 3 replicas, unlearned burst",
    "leader": "webhook, 1 of 3 replicas leading, unlearned burst, first tier labels",
}
SECTIONS = {
    "known": "known",
    "unlearned": "unlearned burst",
    "replica": "1 of 3 replicas",
    "leader": "1 of 3 replicas, leading",
}
REPLICAS = ("replica", "leader")  # the paths that read the API server and watch bindings
# The leader's first labelling outlasts its rounds only in the large cluster.
LEADER_FROM = 5000
LABEL_RATE = TierLabelSettings().writes_per_second  # the default the webhooks run with


def webhooks(count: int) -> tuple[str, ...]:
    """The paths measured at ``count`` nodes (LEADER_FROM: why)."""
    return tuple(path for path in WEBHOOKS if path != "leader" or count >= LEADER_FROM)


# Goals for every webhook row, against the bare app in the same run (issue 41).
SATURATION_AT_LEAST = 0.85
PACED_P99_AT_MOST = 1.25
LOADS = {"light": 2, "paced": 10, "saturation": 16}  # connections
PACED_LOADS = ("light", "paced")  # each connection waits 9 ms after every answer


@dataclass
class Pooled:
    """One server under one load, over every round."""

    rates: list[float] = field(default_factory=list)
    cpu_us: list[float] = field(default_factory=list)  # server CPU per request
    latency_us: Counter[int] = field(default_factory=Counter)
    non_2xx: int = 0

    def add(self, run: Run, cpu_seconds: float) -> None:
        self.rates.append(run.rate)
        self.cpu_us.append(cpu_seconds / (run.rate * DURATION) * 1e6)
        self.latency_us.update(run.latency_us)
        self.non_2xx += run.non_2xx

    @property
    def rate(self) -> float:
        return statistics.median(self.rates)


def start_webhook(
    path: str, count: int, directory: str, prometheus_url: str, certs: str
) -> WebhookProcess:
    """The webhook of one path: "known" and "unlearned" read nodes from a file,
    the replicas from the API server (with its namespaces and steered pods)."""
    if path not in REPLICAS:
        node_file = write_node_file(os.path.join(directory, f"nodes-{count}.json"), count)
        return WebhookProcess(config(prometheus_url, node_file), cert_dir=certs)
    replica = config(prometheus_url, "", kubeconfig=f"{directory}/kubeconfig")
    del replica["nodes"]
    return WebhookProcess(replica, cert_dir=certs)


# One section per webhook path: (path, server, load) -> Pooled, the bare
# servers measured again in every section, beside that path's webhook.
Measured = dict[tuple[str, str, str], Pooled]


def _counter(webhook: WebhookProcess, name: str, outcome: str) -> int:
    """One labelled counter off the webhook's /metrics (0 when not there yet)."""
    metrics = webhook.session.get(webhook.url + "/metrics").text
    found = re.search(rf'{name}\{{outcome="{outcome}"\}} ([\d.e+]+)', metrics)
    return int(float(found[1])) if found else 0


def _label_writes(webhook: WebhookProcess) -> int:
    return _counter(webhook, "nettraffic_tier_label_writes_total", "written")


def measure(count: int, directory: str) -> tuple[Measured, dict[str, int]]:
    """Every path's webhook in a section of its own, started for it and
    stopped after (why: the module's docstring), beside both bare servers;
    and the tier labels each path's webhook wrote during its rounds."""
    import urllib3

    urllib3.disable_warnings()
    pooled: Measured = {}
    label_writes: dict[str, int] = {}
    certs = make_certs(os.path.join(directory, f"tls-{count}"))
    bodies = {
        "bare": review(pod()),
        "bare-wsgi": review(pod()),
        "known": review(pod(annotations={EXPECTED_BANDWIDTH: "1Mi"})),
        "unlearned": review(pod()),
        "replica": review(pod()),
        "leader": review(pod()),
    }
    # Each script written once: the light and paced loads share the paced one.
    scripts = {
        (server, load): wrk_script(directory, load in PACED_LOADS, bodies[server], server)
        for server in SERVERS
        for load in LOADS
    }
    histogram = os.path.join(directory, "histogram.txt")
    api = FakeKubeAPI()
    bares: dict[str, ServerProcess] = {}
    with prometheus_for(count) as prometheus:
        try:
            # The bare servers read the server settings a webhook would.
            config_path = os.path.join(directory, f"bare-{count}.json")
            with open(config_path, "w") as handle:
                server = {
                    "address": "127.0.0.1",
                    "certFile": os.path.join(certs, "tls.crt"),
                    "keyFile": os.path.join(certs, "tls.key"),
                }
                json.dump({**config(prometheus.url, ""), "server": server}, handle)
            bares["bare"] = ServerProcess(config_path)
            bares["bare-wsgi"] = ServerProcess(config_path, extra=("--no-flask",))
            for obj in node_list(count):
                api.put(obj)
            api.put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}})
            kubeconfig = api.kubeconfig(f"{directory}/kubeconfig")
            for path in webhooks(count):
                others = None
                if path in REPLICAS:
                    names = node_names(count)
                    others = OtherReplicas(api, names, kubeconfig, leading=path == "replica")
                webhook = start_webhook(path, count, directory, prometheus.url, certs)
                try:
                    servers: dict[str, ServerProcess | WebhookProcess] = {**bares, path: webhook}
                    written_before = _label_writes(webhook)
                    _rounds(count, servers, scripts, histogram, pooled, path)
                    label_writes[path] = _label_writes(webhook) - written_before
                    scores = webhook.session.get(webhook.url + "/scores").json()
                    assert len(scores["nodes"]) == count and not scores["stale"], path
                    if others is not None:
                        seen = _counter(webhook, "nettraffic_bookings_followed_total", "seen")
                        assert seen > 0, "the replica saw no other replica's pod"
                        leads = others.election is None
                        assert (label_writes[path] > 0) == leads, (path, label_writes)
                finally:
                    webhook.stop()  # first: else it may take the Lease the others give up
                    if others is not None:
                        others.stop()
        finally:
            for bare in bares.values():
                bare.stop()
            api.stop()
    return pooled, label_writes


def _rounds(
    count: int,
    servers: dict[str, ServerProcess | WebhookProcess],
    scripts: dict[tuple[str, str], str],
    histogram: str,
    pooled: Measured,
    section: str,
) -> None:
    """ROUNDS rounds of every load against every server of ``servers``, taking turns."""
    names = list(servers)
    pids = {name: server.process.pid for name, server in servers.items()}
    if PIN:
        for pid in pids.values():
            pin_to_one_cpu(pid)
    for round_number in range(ROUNDS):
        # Each server first in turn, so none always follows the same one.
        shift = round_number % len(names)
        order = names[shift:] + names[:shift]
        for load, connections in LOADS.items():
            for server in order:
                before = cpu_seconds(pids[server])
                run = run_wrk(
                    servers[server].url, scripts[server, load], connections, histogram, DURATION
                )
                figures = pooled.setdefault((section, server, load), Pooled())
                figures.add(run, cpu_seconds(pids[server]) - before)
                print(
                    f"  {count} nodes, {section} section, round {round_number + 1}, {server}, "
                    f"{load}: {run.rate:.0f}/s, p99 {percentile_ms(run.latency_us, 0.99):.2f} ms, "
                    f"server CPU {figures.cpu_us[-1]:.0f} µs per request",
                    flush=True,
                )


def _row(count: int, section: str, server: str, pooled: Measured) -> str:
    light, paced = pooled[section, server, "light"], pooled[section, server, "paced"]
    saturated = pooled[section, server, "saturation"]
    return (
        f"| {count:,} | {SECTIONS[section]} | {LABELS[server]} | {light.rate:.0f}/s | "
        f"{percentile_ms(light.latency_us, 0.99):.2f} ms | {paced.rate:.0f}/s | "
        f"{percentile_ms(paced.latency_us, 0.5):.2f} ms | "
        f"{percentile_ms(paced.latency_us, 0.99):.2f} ms | {saturated.rate:.0f}/s | "
        f"{percentile_ms(saturated.latency_us, 0.5):.2f} ms | "
        f"{percentile_ms(saturated.latency_us, 0.99):.2f} ms | "
        f"{statistics.median(saturated.cpu_us):.0f} µs | "
        f"{light.non_2xx + paced.non_2xx + saturated.non_2xx} |"
    )


class Figures(NamedTuple):
    rows: list[str]
    # (path, bare server, nodes) -> webhook / bare saturation throughput,
    # median of per-round ratios
    relative: dict[tuple[str, str, int], float]
    # (section, server, nodes) -> p99 under the paced load
    paced_p99: dict[tuple[str, str, int], float]
    # (section, server, nodes) -> the server's CPU per request at saturation, median of rounds
    cpu_us: dict[tuple[str, str, int], float]
    # (path, nodes) -> tier labels written during the path's rounds
    label_writes: dict[tuple[str, int], int]


def measure_all() -> Figures:
    figures = Figures([], {}, {}, {}, {})
    with tempfile.TemporaryDirectory() as directory:
        for count in (100, 5000):
            pooled, writes = measure(count, directory)
            figures.label_writes.update({(path, count): n for path, n in writes.items()})
            for path in webhooks(count):
                _add_path(figures, path, count, pooled)
    return figures


def _add_path(figures: Figures, path: str, count: int, pooled: Measured) -> None:
    for server in ("bare", "bare-wsgi", path):
        figures.rows.append(_row(count, path, server, pooled))
        figures.paced_p99[path, server, count] = percentile_ms(
            pooled[path, server, "paced"].latency_us, 0.99
        )
        figures.cpu_us[path, server, count] = statistics.median(
            pooled[path, server, "saturation"].cpu_us
        )
    for bare_server in ("bare", "bare-wsgi"):
        figures.relative[path, bare_server, count] = statistics.median(
            webhook / bare
            for webhook, bare in zip(
                pooled[path, path, "saturation"].rates,
                pooled[path, bare_server, "saturation"].rates,
                strict=True,
            )
        )


class Check(NamedTuple):
    path: str
    count: int
    saturation: float  # throughput, webhook / bare flask app
    p99: float  # paced p99, webhook / bare flask app
    met: bool
    beneath: float  # throughput, webhook / bare WSGI callable
    beneath_p99: float
    own: float  # µs of server CPU per request more than the bare WSGI callable's


def checks(figures: Figures) -> list[Check]:
    relative, paced_p99, cpu_us = figures.relative, figures.paced_p99, figures.cpu_us
    found = []
    for path in WEBHOOKS:
        for count in (100, 5000):
            if path not in webhooks(count):
                continue
            saturation = relative[path, "bare", count]
            p99 = paced_p99[path, path, count] / paced_p99[path, "bare", count]
            met = saturation >= SATURATION_AT_LEAST and p99 <= PACED_P99_AT_MOST
            beneath = relative[path, "bare-wsgi", count]
            beneath_p99 = paced_p99[path, path, count] / paced_p99[path, "bare-wsgi", count]
            own = cpu_us[path, path, count] - cpu_us[path, "bare-wsgi", count]
            found.append(Check(path, count, saturation, p99, met, beneath, beneath_p99, own))
    return found


def ratios_table(found: list[Check]) -> str:
    # The floor first: /mutate is answered beneath flask, so the bare WSGI
    # callable on the same stack is what the webhook adds its own work to.
    return "\n".join(
        [
            "| path | nodes | saturation throughput, webhook / bare WSGI callable (the floor; "
            "median of rounds) | paced p99, webhook / bare WSGI callable | the webhook's own "
            "cost per admission (server CPU at saturation, webhook minus bare WSGI callable) | "
            "saturation throughput, webhook / bare flask app | paced p99, webhook / bare flask "
            "app | goals met |",
            "|---|---|---|---|---|---|---|---|",
            *(
                f"| {LABELS[c.path]} | {c.count:,} | {c.beneath:.1%} | {c.beneath_p99:.2f}x | "
                f"{c.own:.0f} µs | {c.saturation:.1%} | {c.p99:.2f}x | {'yes' if c.met else 'no'} |"
                for c in found
            ),
        ]
    )


def method(label_writes: dict[tuple[str, int], int]) -> str:
    """How the section's figures were taken."""
    return (
        f"wrk on the same 2-core machine as the servers, over TLS with keep-alive; "
        f"{ROUNDS} rounds of {DURATION} s per server and load, the servers taking turns; "
        "rates are medians of rounds, latencies are percentiles of every request. Loads: "
        "light (2 connections, 9 ms between answers: about 200/s offered), paced (10 "
        "connections, 9 ms between answers: about 1,000/s offered) and saturation (16 "
        "connections, no wait). Two bare servers answer a fixed patch: a flask app, and "
        "a WSGI callable without flask (the webhook answers the API server's admissions "
        "beneath flask, webhook/mutate.py). One webhook per path, each in a section "
        "of its own, started for it and stopped after, beside both bare servers in the "
        "same rounds: pods whose bandwidth is known "
        "(annotated; a learned figure takes the same path), a burst of one workload "
        "nothing is learned of (booked at the default), and the same burst admitted by "
        "one of 3 replicas, whose binding watch shows the other two's steered pods (4 a "
        "second, in a fake API server over HTTP) and one of which holds the tier labels' "
        "Lease, as for two replicas of three. At 5,000 nodes the same replica is also "
        "measured leading, while it writes its first tier labels (every node's, at "
        f"tierLabels.writesPerSecond, {LABEL_RATE:g}/s: about {LEADER_FROM / LABEL_RATE:.0f} s; "
        f"{label_writes.get(('leader', 5000), 0):,} writes during its rounds). "
        "All servers run gunicorn "
        f"{gunicorn.__version__}, one gthread worker with {ServerSettings().threads} threads "
        "(the default), the same ssl_context "
        "hook and the same interpreter tuning (post_worker_init: 1 ms GIL turns, start-up "
        "objects frozen). The webhook refreshes every 15 s (the default) in its refresher "
        "process, which shares the two cores with the servers, wrk and Prometheus. "
        "Server CPU per request: user and system time of the server's processes over a "
        "saturation run's requests, median of rounds."
        + (" Each server pinned to one CPU (NT_BENCH_PIN=1)." if PIN else "")
    )


def main(argv: list[str] | None = None) -> int:
    args = bench_parser(__doc__).parse_args(argv)
    if wrk_missing():
        return 1
    started = time.time()
    figures = measure_all()
    elapsed = time.time() - started
    table = "\n".join(
        [
            "| nodes | section | server | light: achieved rate | light p99 | paced: achieved rate | paced p50 | paced p99 | saturation throughput | saturation p50 | saturation p99 | saturation: server CPU per request | non-2xx |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
            *figures.rows,
        ]
    )
    found = checks(figures)
    ratios = ratios_table(found)
    goals = (
        f"Goals for every row: saturation throughput at least {SATURATION_AT_LEAST:.0%} of the "
        f"bare flask app's, paced p99 at most {PACED_P99_AT_MOST}x the bare flask app's, in the "
        f"same run. Met in {sum(check.met for check in found)} of {len(found)} rows. The "
        "webhook answers the API server's admissions beneath flask (webhook/mutate.py), so "
        "its floor is the bare WSGI callable, the same stack without flask: against it the "
        "table says what the webhook's own work costs per admission (no goal; the goals are "
        "set against the bare flask app, the ceiling the project started from)."
    )
    print(table)
    print()
    print(ratios)
    print(f"\n{goals}\n{elapsed:.0f}s")
    if not args.no_write:
        write_section(
            "admission",
            "Admission latency and throughput",
            "python -m bench.admission",
            method(figures.label_writes)
            + f"\n\n{table}\n\n{ratios}\n\n{goals}\n\nRun time: {elapsed:.0f} s.",
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
