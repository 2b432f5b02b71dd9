"""Talkers placed together, judged on real packets: services and their
clients over TCP on an emulated cluster in three zones.

Six nodes are network namespaces (bench/testbed/network.py), two in each of
three zones; a packet a node sends to a pod in another zone waits
``ZONE_DELAY_MS`` first (bench/testbed/zones.py; this kernel has no netem),
so a round trip between zones is 1 ms longer, as between availability
zones (0.5-2 ms). Each run draws its services anew: three servers of one or
two pods, four client workloads of two or three pods, each calling one
server (bench/testbed/conversation.py: a connection to each of the server's
pods, requests round-robin over them, as kube-proxy spreads connections
over every endpoint whatever its zone). The clients' byte counts are
exported as an Istio sidecar names them and each server has a Service and
an EndpointSlice (bench/peer_testbed_services.py); a real Prometheus
scrapes the counters, node_exporter, cAdvisor and kube-state-metrics.

A run: the scheduler stand-in alone (bench/testbed/cluster.py:
kube-scheduler's default profile as bench/scheduler_model.py models it)
places a first rollout, which talks for a while; then each placement in
turn rolls out every workload anew, the servers first, then the clients
(which connect to the new servers), and the previous rollout is deleted:

- ``default`` and ``default-again``: the scheduler stand-in alone, twice,
  so the gap between them measures the run-to-run noise;
- ``nettraffic``: the real webhook (gunicorn over TLS), no flow source;
- ``nettraffic-peers``: the real webhook with ``peers.source: istio``, once
  its learner has read the pairs; its tier label writer copies the zones;
- ``oracle``: bench/peer_testbed_oracle.py (the clients as near their
  servers as its spread allows: a floor from the connections' even spread,
  not a bound on the product).

With ``--prefer-same-zone`` the Services carry ``trafficDistribution:
PreferSameZone``: a client connects only to the server pods in its own zone
when there are any, else to all of them, as kube-proxy picks endpoints by
their zone hints (kubernetes pkg/proxy/topology.go,
``topologyModeFromHints`` and ``availableForTopology``, at 008b3652).

Each rollout's pods run ``hold`` seconds, and the figures come from those
seconds: each client pod's request round trips, and of the bytes between
clients and servers, the share that crossed a node link and the share that
crossed zones; a probe (bench/peer_testbed_probe.py) measures the round
trip within a zone beside them. bench/peer_testbed_verdicts.py judges the
draws. Needs root; everything it creates is removed at the end, also on
failure.
"""

import contextlib
import os
import random
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from bench.peer_testbed_figures import (
    NODES,
    POLICIES,
    REQUESTS_PER_SECOND,
    RESPONSE_BYTES,
    ZONE_DELAY_MS,
    Figures,
    least_cross_zone,
    p99,
    zones_per_workload,
)
from bench.peer_testbed_oracle import NearestServers
from bench.peer_testbed_probe import Probe
from bench.peer_testbed_report import report
from bench.peer_testbed_services import (
    NAMESPACE,
    SERVER_PORT,
    Endpoints,
    Services,
    bytes_of,
    istio_series,
)
from bench.report import bench_parser, drawn_seed, rerun_command, write_section
from bench.testbed.cluster import ControlPlane, PlacedPod, Placement, node_object
from bench.testbed.conversation import FLUSH_SECONDS, read_rtts
from bench.testbed.network import Network, remove_leftovers
from bench.testbed.observe import NodeExporters, PodMetrics, PodSeries, scrape_configs
from bench.testbed.run import why_unavailable as why_no_testbed
from bench.testbed.teardown import Emulated, stop_all
from bench.testbed.workload import Arrival, PodProcess, in_namespace
from bench.testbed.zones import delay_between_zones, why_no_zones, zone_of
from harness.exporter import serve_metrics
from harness.fakeapi import FakeKubeAPI
from harness.prometheus import PrometheusServer
from harness.webhook import WebhookProcess
from kubectl_nettraffic.kube.nodes import ZONE_COPY_LABEL, ZONE_LABEL

LINK_BITS = 1e9  # no link is near full here: the figures are about distance
STARTUP_SECONDS, IDLE_SECONDS = 10.0, 10.0  # the idle probe once the start has died down
# Between a rollout of the servers and one of their clients: a learner's
# pass (learning.interval 5 s) after a scrape (2 s) has seen the servers
# where they now run, as it would have by a later rollout in a cluster.
SETTLE_SECONDS = 10.0


class PeerTestbed(Emulated):
    """The emulated cluster of one run; a context manager that always tears down."""

    def __init__(
        self,
        seed: int,
        hold: float,
        prefer_same_zone: bool = False,
        log: Callable[[str], None] = print,
    ) -> None:
        self.seed, self.hold, self.log = seed, hold, log
        self.prefer_same_zone = prefer_same_zone
        self.rng = random.Random(seed)
        self.services = Services.draw(self.rng)
        self.workdir = tempfile.mkdtemp(prefix="nt-peer-testbed-")
        self._parts: list[Callable[[], None]] = []
        self._controls: list[ControlPlane] = []
        self._counters: dict[str, tuple[int, int]] = {}
        self._stopping = threading.Event()
        self._rolling: ControlPlane | None = None
        self._rollouts = 0  # so far: each rollout's pods have their own ReplicaSet
        self.idle_probe_ms = float("nan")

    def unavailable(self) -> str | None:
        return why_unavailable()

    def close(self) -> None:
        self._stopping.set()
        for control in self._controls:
            with contextlib.suppress(Exception):
                control.stop()
        stop_all(self._parts, self.log)
        remove_leftovers()
        shutil.rmtree(self.workdir, ignore_errors=True)

    # ------------------------------------------------------------ building

    def _build(self) -> None:
        names = [f"tb-node-{i}" for i in range(1, NODES + 1)]
        self.network = Network(names, int(LINK_BITS))
        self._parts.append(self.network.close)
        self.network.route_pods_between_nodes()
        self.zone_by_node = {n.name: zone_of(n) for n in self.network.nodes}
        for process in delay_between_zones(self.network, ZONE_DELAY_MS, self.workdir):
            self._parts.append(process.stop)
        self.exporters = NodeExporters(self.network.nodes, LINK_BITS, self.workdir)
        self._parts.append(self.exporters.stop)
        self.pod_metrics = PodMetrics(self._pod_series)
        self._parts.append(self.pod_metrics.stop)
        self.mesh = serve_metrics(self._istio_series)
        self._parts.append(self.mesh.shutdown)
        self._parts.append(self.mesh.server_close)
        self.prometheus = PrometheusServer(
            scrape_interval="2s",
            scrape_configs=[
                *scrape_configs(self.exporters, self.pod_metrics),
                {
                    "job_name": "istio-sidecars",
                    "honor_labels": True,
                    "static_configs": [{"targets": [f"127.0.0.1:{self.mesh.server_address[1]}"]}],
                },
            ],
        )
        self._parts.append(self.prometheus.stop)
        self.api = FakeKubeAPI()
        self._parts.append(self.api.stop)
        for testbed_node in self.network.nodes:
            obj = node_object(testbed_node)
            obj["metadata"]["labels"][ZONE_LABEL] = zone_of(testbed_node)
            self.api.put(obj)
        self.api.put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
        self.endpoints = Endpoints(
            self.api, self.network, self.services, self.prefer_same_zone, self.workdir
        )
        self.probe = Probe(
            self.network, self.workdir, SERVER_PORT, REQUESTS_PER_SECOND, RESPONSE_BYTES
        )
        self._parts.append(self.probe.stop)
        self.kubeconfig = self.api.kubeconfig(os.path.join(self.workdir, "kubeconfig"))
        sampler = threading.Thread(target=self._sample, daemon=True)
        sampler.start()

    def _config(self, peers: bool) -> dict[str, Any]:
        return {
            "kubeconfig": self.kubeconfig,
            "prometheus": {"url": self.prometheus.url, "window": "10s"},
            "metricsServer": {"enabled": False},
            "scoring": {"mode": "link-utilization"},
            "refresh": {"interval": "2s", "maxStaleness": "30s"},
            "steering": {"podStartup": "2s"},
            "learning": {"interval": "5s"},
            "peers": {"source": "istio" if peers else "none"},
        }

    # ------------------------------------------------------------ observing

    def _pods(self) -> list[PlacedPod]:
        return [p for control in self._controls for p in list(control.pods)]

    def _sample(self) -> None:
        while not self._stopping.wait(1.0):
            for placed in self._pods():
                if placed.process is not None and not placed.process.exited():
                    counters = placed.process.counters()
                    if counters is not None:
                        self._counters[placed.name] = counters

    def _pod_series(self) -> list[PodSeries]:
        series = []
        for placed in self._pods():
            counters = self._counters.get(placed.name)
            if placed.process is None or counters is None or placed.process.exited():
                continue
            arrival = placed.arrival
            names = (NAMESPACE, placed.name, arrival.replica_set, arrival.workload)
            series.append(PodSeries(*names, placed.created, *counters, node=placed.node or ""))
        return series

    def _istio_series(self) -> bytes:
        running = [p for p in self._pods() if p.arrival.kind == "client" and p.process is not None]
        return istio_series(running, self.services, self.workdir).encode()

    # ------------------------------------------------------------ pods

    def _start(self, placed: PlacedPod, namespace: str) -> PodProcess:
        log = os.path.join(self.workdir, placed.name + ".log")
        python = [sys.executable, "-m", "bench.testbed.conversation"]
        if placed.arrival.kind == "server":
            argv = [*python, "server", str(SERVER_PORT), str(RESPONSE_BYTES)]
        else:
            out = os.path.join(self.workdir, placed.name)
            self.endpoints.write(placed, self._running_servers())
            rate, size = str(REQUESTS_PER_SECOND), str(RESPONSE_BYTES)
            argv = [*python, "client", out, rate, size, f"@{out}.endpoints"]
        return PodProcess(in_namespace(namespace, argv, log), log)

    def _running_servers(self) -> list[PlacedPod]:
        return [p for p in self._pods() if p.arrival.kind == "server" and p.namespace]

    def _control(self, policy: str, webhook: WebhookProcess | None) -> ControlPlane:
        seed = self.rng.randrange(2**31)
        placement = (
            NearestServers(
                self.network.nodes,
                LINK_BITS,
                self.services,
                self.zone_by_node,
                self.rolling_servers,
                seed,
            )
            if policy == "oracle"
            else Placement("default", self.network.nodes, LINK_BITS, seed)
        )
        for placed in self._pods():  # what runs already, as the scheduler's cache holds it
            if placed.node is not None:
                arrival = placed.arrival
                placement.state.bind(
                    self._node_index(placed.node), arrival.replica_set, arrival.cpu, arrival.memory
                )
        control = ControlPlane(
            self.api,
            self.network,
            placement,
            self._start,
            (webhook.url, webhook.session) if webhook is not None else None,
            (0.05, 0.25),
            random.Random(self.rng.random()),
        )
        self._controls.append(control)
        return control

    def _create(
        self, control: ControlPlane, pods: Sequence[tuple[str, str]], spread: float
    ) -> None:
        """Create ``pods`` ((workload, kind)) at drawn times over ``spread``
        seconds; return once every one runs."""
        times = sorted(self.rng.uniform(0, spread) for _ in pods)
        order = list(pods)
        self.rng.shuffle(order)
        started = time.time()
        for at, (workload, kind) in zip(times, order, strict=True):
            time.sleep(max(0.0, started + at - time.time()))
            control.create(Arrival(at, workload, kind, 0.0, cpu=0.25, revision=str(self._rollouts)))
        deadline = time.time() + 60
        while any(p.process is None for p in control.pods) and time.time() < deadline:
            time.sleep(0.2)

    def _retire(self, control: ControlPlane) -> None:
        control.stop()
        self._controls.remove(control)

    # ------------------------------------------------------------ the run

    def rolling_servers(self) -> list[PlacedPod]:
        """The server pods of the rollout in progress."""
        return [] if self._rolling is None else _servers(self._rolling)

    def _roll_out(self, control: ControlPlane, previous: ControlPlane | None) -> None:
        """Every workload anew under ``control``, as two Deployments' rollouts
        one after the other: the servers; the previous servers go (their
        clients follow the endpoints to the new ones); once the learner has
        seen the servers where they now run, the clients; the previous
        clients go."""
        self._rolling, self._rollouts = control, self._rollouts + 1
        self._create(control, self.services.pods("server"), 2.0)
        self._publish_endpoints()
        if previous is not None:
            self._retire_servers(previous)
            time.sleep(SETTLE_SECONDS)
        self._create(control, self.services.pods("client"), 5.0)
        if previous is not None:
            self._retire(previous)

    def _retire_servers(self, control: ControlPlane) -> None:
        """``control``'s servers out of the endpoints, then gone, also from
        the scheduler cache of the rollout in progress (which holds what ran
        when it began)."""
        servers = _servers(control)
        control.pods[:] = [p for p in control.pods if p.arrival.kind != "server"]
        self._publish_endpoints()
        time.sleep(2 * FLUSH_SECONDS)  # every client has read its endpoints again
        for placed in servers:
            control.delete(placed)
            if self._rolling is not None and placed.node is not None:
                index = self._node_index(placed.node)
                arrival = placed.arrival
                self._rolling.placement.state.unbind(
                    index, arrival.replica_set, arrival.cpu, arrival.memory
                )

    def _node_index(self, name: str) -> int:
        return next(n.index - 1 for n in self.network.nodes if n.name == name)

    def _publish_endpoints(self) -> None:
        clients = [p for p in self._pods() if p.arrival.kind == "client" and p.process]
        self.endpoints.publish(self._running_servers(), clients)

    def run(self, policies: Sequence[str] = POLICIES) -> list[Figures]:
        self.log(
            f"run {self.seed}: servers {self.services.servers}, clients {self.services.clients}"
        )
        started = time.time() + STARTUP_SECONDS
        time.sleep(STARTUP_SECONDS + IDLE_SECONDS)
        self.idle_probe_ms = self.probe.p99_ms(started, time.time())
        current = self._control("warm-up", None)
        self._roll_out(current, None)
        results = []
        for policy in policies:
            webhook = None
            if policy.startswith("nettraffic"):
                webhook = WebhookProcess(self._config(peers=policy == "nettraffic-peers"))
            try:
                if webhook is not None:
                    self._wait_until_learned(webhook, peers=policy == "nettraffic-peers")
                self.log(f"run {self.seed}: {policy} rolls the servers and the clients out")
                rolled = self._control(policy, webhook)
                self._roll_out(rolled, current)
                current = rolled
                results.append(self._measure(policy, rolled))
            finally:
                if webhook is not None:
                    webhook.stop()
        return results

    def _wait_until_learned(self, webhook: WebhookProcess, peers: bool) -> None:
        """Until the webhook knows every workload's bandwidth, as one that
        has run a while does (a pod of a workload it has not learned is
        steered in full, by rank); with ``peers``, every client's server
        and the zones' copy on the nodes too. At most 90 s."""
        workloads = set(self.services.servers) | set(self.services.clients)
        callers = set(self.services.clients) if peers else set()
        deadline = time.time() + 90
        while time.time() < deadline:
            rows = webhook.session.get(webhook.url + "/workloads", timeout=5).json()["workloads"]
            learned = {row["name"] for row in rows if row.get("learnedBytesPerSecond")}
            talking = {row["name"] for row in rows if row.get("peers")}
            nodes = [self.api.get(("api/v1", None, "nodes"), n.name) for n in self.network.nodes]
            labels = [((n or {}).get("metadata") or {}).get("labels") or {} for n in nodes]
            copied = not peers or all(ZONE_COPY_LABEL in found for found in labels)
            if workloads <= learned and callers <= talking and copied:
                return
            time.sleep(1.0)
        raise RuntimeError(f"the webhook learned not all of {sorted(workloads)} in 90 s")

    def _measure(self, policy: str, control: ControlPlane) -> Figures:
        clients = [p for p in control.pods if p.process is not None and p.arrival.kind == "client"]
        servers = _servers(control)
        start_counts = {p.name: bytes_of(self.workdir, p.name) for p in clients}
        started = time.time()
        time.sleep(self.hold)
        ended = time.time()
        end_counts = {p.name: bytes_of(self.workdir, p.name) for p in clients}
        server_node = {
            f"{self.network.pod_addresses[p.namespace]}:{SERVER_PORT}": p.node
            for p in servers
            if p.namespace is not None
        }
        total = cross_zone = inter_node = least_cross_zone = 0.0
        pooled: list[tuple[float, float]] = []
        pod_p99s = []
        for placed in clients:
            least = self._least_cross_zone(placed, servers)
            for endpoint, (sent, received) in end_counts[placed.name].items():
                before = start_counts[placed.name].get(endpoint, [0, 0])
                moved = sent - before[0] + received - before[1]
                total += moved
                least_cross_zone += least * moved
                there = server_node.get(endpoint)
                if there != placed.node:
                    inter_node += moved
                if (
                    there is None
                    or self.zone_by_node[there] != self.zone_by_node[placed.node or ""]
                ):
                    cross_zone += moved
            rtts = [
                (at, rtt)
                for at, rtt in read_rtts(os.path.join(self.workdir, placed.name + ".rtt"))
                if started <= at <= ended
            ]
            if rtts:
                pooled += rtts
                pod_p99s.append(p99(rtts) * 1e3)
        return Figures(
            policy,
            p99(pooled) * 1e3 if pooled else float("nan"),
            pod_p99s,
            cross_zone / total if total else float("nan"),
            inter_node / total if total else float("nan"),
            total / (ended - started),
            control.webhook_failures,
            least_cross_zone / total if total else float("nan"),
            self.probe.p99_ms(started, ended),
            self.idle_probe_ms,
            zones_per_workload(
                (p.arrival.workload, self.zone_by_node[p.node]) for p in control.pods if p.node
            ),
        )

    def _least_cross_zone(self, client: PlacedPod, servers: Sequence[PlacedPod]) -> float:
        """None of its bytes need cross with PreferSameZone (in a zone that
        holds a server pod); else as ``least_cross_zone`` of its server's zones."""
        server, _ = self.services.clients[client.arrival.workload]
        zones = [self.zone_by_node[p.node or ""] for p in servers if p.arrival.workload == server]
        return 0.0 if self.prefer_same_zone else least_cross_zone(zones)


def _servers(control: ControlPlane) -> list[PlacedPod]:
    return [p for p in list(control.pods) if p.arrival.kind == "server"]


def why_unavailable() -> str | None:
    """None when this machine can run the peer testbed, else what is missing."""
    return why_no_testbed() or why_no_zones()


def main(argv: list[str] | None = None) -> int:
    parser = bench_parser(__doc__)
    parser.add_argument("--runs", type=int, default=5, help="runs, each its own draw (default 5)")
    parser.add_argument("--hold", type=float, default=30.0, help="seconds each rollout is measured")
    parser.add_argument(
        "--seed", type=int, default=None, help="the first run's seed (default: drawn)"
    )
    parser.add_argument(
        "--prefer-same-zone",
        action="store_true",
        help="the Services carry trafficDistribution: PreferSameZone",
    )
    args = parser.parse_args(argv)
    why = why_unavailable()
    if why is not None:
        print(f"peer testbed unavailable: {why}")
        return 1
    first = drawn_seed(args.seed)
    runs = []
    for seed in range(first, first + args.runs):
        with PeerTestbed(seed, args.hold, args.prefer_same_zone) as testbed:
            runs.append(testbed.run())
        print(report(runs, args.hold, args.prefer_same_zone), flush=True)
    body = report(runs, args.hold, args.prefer_same_zone)
    print(body)
    if not args.no_write:
        flag = ["--prefer-same-zone"] if args.prefer_same_zone else []
        arguments = ["--runs", str(args.runs), "--hold", f"{args.hold:g}", *flag]
        # The seed always: ``arguments`` are rebuilt, not the ones given.
        command = rerun_command("bench.peer_testbed", arguments, None, first)
        write_section(
            "peer-testbed" + ("-prefer-same-zone" if args.prefer_same_zone else ""),
            f"Talkers together on real packets{', PreferSameZone' if flag else ''}"
            f" (seeds {first}..{first + args.runs - 1})",
            command,
            body,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
