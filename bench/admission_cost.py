"""What one admission costs the webhook's Python, beside the bare apps, with
warm and with cold CPU caches. No sockets: both apps are called as WSGI
callables in this process, so one run takes seconds, not minutes.

    python -m bench.admission_cost

Why cold: behind gunicorn and TLS, the stack's own work between two
admissions (TLS records, the kernel's socket code, gunicorn's parser and
threads) pushes the app's code and data out of the CPU's private caches, so
each admission starts cold. A tight loop keeps everything cached and
understates the cost about twofold (the decision alone, 2.5-fold). Here
each cold call follows a pass over 6 MiB of memory and 60,000 Python objects
(this machine has 2 MiB of L2 per core). That brings the in-process figures
close to what the webhook's worker spends per request under load (see
docs/design/admission-performance.md, "Where an admission's time goes").

The scores come from a synthetic traffic source, refreshed before each
series, so the figures do not depend on Prometheus.
"""

import dataclasses
import io
import json
import random
import statistics
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, NamedTuple

from bench.bare_app import bare_wsgi_app, create_bare_app
from bench.fixtures import GBIT, node_list, node_names
from bench.report import bench_parser, write_section
from harness.reviews import pod, review
from kubectl_nettraffic.config import Settings, settings_from_mapping
from kubectl_nettraffic.kube.nodes import ZONE_LABEL, node_from_json
from kubectl_nettraffic.kube.pods import EXPECTED_BANDWIDTH
from kubectl_nettraffic.kube.service_routing import ZONE
from kubectl_nettraffic.kube.workloads import Workload, pod_workload
from kubectl_nettraffic.learning.conversations import Conversations
from kubectl_nettraffic.learning.workload_bandwidth import LearnedBandwidth
from kubectl_nettraffic.measuring.measurement import Measurer, RefreshOutcome
from kubectl_nettraffic.scoring.readings import NodeTraffic
from kubectl_nettraffic.serving import Serving, serving_parts
from kubectl_nettraffic.sources.prometheus import TrafficReport
from webhook.admission import parse_review
from webhook.app import create_app

# The paths take turns: each round times every path once, warm then cold,
# the order reversed every other round, and a path's ratio to a known pod's
# is taken within a round (the machine is shared: its speed drifts between
# paths timed minutes apart). Per round: a tight loop of WARM_CALLS calls,
# and COLD_CALLS calls each after a cache flush.
ROUNDS = 15
WARM_CALLS, COLD_CALLS = 400, 100
# Pods admitted before a path is timed, and not measured yet when it is.
IN_FLIGHT = 10_000
# A decision of any path, peers included, costs at most this many times a
# known pod's (issues 41 and 73).
MOST_RELATIVE = 1.5
# ... and one with peers at most this many (issue 62).
MOST_RELATIVE_PEERS = 1.3


class Shape(NamedTuple):
    """Whom the known pod's workload talks to."""

    peers: int
    pods_each: int
    talker_pods: int  # the workload's own pods (the fan-in room on each node)
    rate: float | None  # each pair's bytes/s over the workload's pods; None: drawn
    # The peers call the workload through a Service routed by zone: its
    # plan also reads the zones its own pods serve, as the watches show them.
    serves_by_zone: bool = False


PEERS, PEER_PODS = 8, 20  # the known pod's workload talks to 8, each with 20 pods
# ... or calls one server of 3 pods with all of each pod's bytes, and has so
# many pods that the server's nodes never fill their share of them: each
# of those nodes pulls every pod, and is looked up one by one.
SERVER_PODS, CALLERS = 3, 3 * IN_FLIGHT
# scoring.mode link-utilization over links of these speeds: the choice
# reads the heap grouped by link speed (ranking/candidates.py's Heaps).
MIXED_LINKS = (GBIT, 10 * GBIT, 25 * GBIT)
KNOWN_ON_MIXED_LINKS = "known, links of 1, 10 and 25 Gbit/s, scoring.mode link-utilization"
KNOWN_WITH_PEERS = f"known, its workload talking to {PEERS} others"
KNOWN_CALLING_SERVER = f"known, its workload calling one server of {SERVER_PODS} pods"
KNOWN_SERVING_BY_ZONE = f"known, its workload serving {PEERS} others, routed by zone"
SHAPES = {
    KNOWN_WITH_PEERS: Shape(PEERS, PEER_PODS, 5, None),
    KNOWN_SERVING_BY_ZONE: Shape(PEERS, PEER_PODS, 5, None, serves_by_zone=True),
    KNOWN_CALLING_SERVER: Shape(1, SERVER_PODS, CALLERS, float(2**20 * CALLERS)),
}

WEBHOOK = "webhook: POST /mutate (parsing, decision, patch, metrics; beneath flask)"
BARE_FLASK = "bare flask app: POST /mutate (fixed patch)"
BARE_WSGI = "bare WSGI callable: POST /mutate (fixed patch, no flask)"

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


class SyntheticTraffic:
    """Prometheus stand-in: every node at a fixed random rate, measured now,
    on a link of one of ``speeds`` drawn at random."""

    def __init__(self, names: list[str], seed: int = 7, speeds: tuple[float, ...] = (10 * GBIT,)):
        rng = random.Random(seed)
        self.rates = {name: rng.uniform(1e6, 1e8) for name in names}
        self.speeds = {name: rng.choice(speeds) for name in names}

    def fetch(self, _nodes: object) -> TrafficReport:
        by_node = {
            name: NodeTraffic(rate * 0.7, rate * 0.3, self.speeds[name], ("synthetic",))
            for name, rate in self.rates.items()
        }
        return TrafficReport(by_node, (), (), {}, (), time.time())


def _drawn_places(names: list[str], pods: int, rng: random.Random) -> dict[str, int]:
    placed: dict[str, int] = {}
    for _ in range(pods):
        node = rng.choice(names)
        placed[node] = placed.get(node, 0) + 1
    return placed


def with_peers(
    outcome: RefreshOutcome, workload: Workload, shape: Shape, seed: int = 11
) -> RefreshOutcome:
    """``outcome`` with conversations learned: ``workload`` talks to
    ``shape``'s peers, every pod on a node drawn at random, in three zones
    (node index mod 3)."""
    snapshot = outcome.snapshot
    assert snapshot is not None
    rng = random.Random(seed)
    names = sorted(snapshot.nodes)
    nodes = {
        name: dataclasses.replace(
            node, labels={**node.labels, ZONE_LABEL: f"zone-{names.index(name) % 3}"}
        )
        for name, node in snapshot.nodes.items()
    }
    peers = [Workload("default", "Deployment", f"peer-{i}") for i in range(shape.peers)]
    places = {workload: _drawn_places(names, shape.talker_pods, rng)}
    for peer in peers:
        places[peer] = _drawn_places(names, shape.pods_each, rng)
    pairs = {
        workload: tuple(
            (peer, rng.uniform(1e5, 1e7) if shape.rate is None else shape.rate) for peer in peers
        )
    }
    for peer, rate in pairs[workload]:
        pairs[peer] = ((workload, rate),)
    served = shape.serves_by_zone
    conversations = Conversations(
        pairs,
        places,
        time.time(),
        calls=frozenset((peer, workload) for peer in peers if served),
        routing={workload: ZONE} if served else {},
    )
    learned = LearnedBandwidth({workload: 2**20}, None, time.time(), conversations)
    return dataclasses.replace(
        outcome, snapshot=dataclasses.replace(snapshot, nodes=nodes, learned=learned)
    )


class CacheFlusher:
    """Touches more memory than the private caches hold, the way the stack's
    work between two admissions does: a plain copy for the data caches, a walk
    over Python objects for the interpreter's own structures."""

    def __init__(self) -> None:
        self.source = bytearray(6 * 2**20)
        self.target = bytearray(6 * 2**20)
        self.objects = [(i, str(i)) for i in range(60_000)]

    def __call__(self) -> None:
        self.target[:] = self.source
        total = 0
        for number, _ in self.objects[::7]:
            total += number


def _start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> None:
    if not status.startswith("200"):
        raise RuntimeError(f"the app answered {status}")


def wsgi_post(app: WsgiApp, body: bytes) -> Callable[[], None]:
    """One POST /mutate through ``app``, as gunicorn would call it."""

    def call() -> None:
        environ = {
            "REQUEST_METHOD": "POST",
            "PATH_INFO": "/mutate",
            "QUERY_STRING": "",
            "SERVER_NAME": "127.0.0.1",
            "SERVER_PORT": "8443",
            "SERVER_PROTOCOL": "HTTP/1.1",
            "CONTENT_TYPE": "application/json",
            "CONTENT_LENGTH": str(len(body)),
            "wsgi.version": (1, 0),
            "wsgi.url_scheme": "https",
            "wsgi.input": io.BytesIO(body),
            "wsgi.errors": sys.stderr,
            "wsgi.multithread": True,
            "wsgi.multiprocess": False,
            "wsgi.run_once": False,
        }
        b"".join(app(environ, _start_response))

    return call


def warm_us(call: Callable[[], None]) -> float:
    """One tight loop after a short warm-up, in microseconds per call."""
    for _ in range(WARM_CALLS // 4):
        call()
    started = time.perf_counter()
    for _ in range(WARM_CALLS):
        call()
    return (time.perf_counter() - started) / WARM_CALLS * 1e6


def cold_us(call: Callable[[], None], flush: CacheFlusher) -> float:
    """Median of calls that each follow a cache flush, in microseconds."""
    timings = []
    for _ in range(COLD_CALLS):
        flush()
        started = time.perf_counter_ns()
        call()
        timings.append(time.perf_counter_ns() - started)
    return statistics.median(timings) / 1000


class Timed(NamedTuple):
    """One piece over the rounds: (warm, cold) microseconds per round."""

    rounds: list[tuple[float, float]]

    def median(self) -> tuple[float, float]:
        return (
            statistics.median(w for w, _ in self.rounds),
            statistics.median(c for _, c in self.rounds),
        )

    def ratios(self, to: "Timed") -> list[tuple[float, float]]:
        """Round by round, this piece's warm and cold times over ``to``'s."""
        return [
            (warm / warm_to, cold / cold_to)
            for (warm, cold), (warm_to, cold_to) in zip(self.rounds, to.rounds, strict=True)
        ]


def _paths(
    settings: Settings, obj: Mapping[str, Any], unlearned_pod: Mapping[str, Any], names: list[str]
) -> dict[str, tuple[Serving, Mapping[str, Any], list[str] | None]]:
    """Each path's serving parts, the pod it admits, and the nodes the other
    replicas' pods land on (None: one replica)."""
    peer_settings = dataclasses.replace(
        settings, peers=dataclasses.replace(settings.peers, source="istio")
    )
    mixed_settings = dataclasses.replace(
        settings, scoring=dataclasses.replace(settings.scoring, mode="link-utilization")
    )
    # Each path as a real cluster takes it, every decision with IN_FLIGHT
    # pods already admitted the same way and not measured yet:
    # - a pod whose figure is known (annotated here; a learned figure takes
    #   the same path): booked by that figure alone;
    # - a pod of a workload nothing is learned of: booked at the default,
    #   its workload's pods in flight spread it (ranking/handicaps.py);
    # - either in one of 3 replicas, the other two's pods arriving through
    #   the binding watch (book_seen): the choice counts on their nodes the
    #   part of a pod they may be steering unseen (replica_share.py).
    return {
        "known": (serving_parts(settings), obj, None),
        "unlearned": (serving_parts(settings), unlearned_pod, None),
        # - a known pod on links of different speeds, scored by utilisation:
        #   the nodes rank with the pod's bytes on each link.
        KNOWN_ON_MIXED_LINKS: (serving_parts(mixed_settings), obj, None),
        "known, 1 of 3 replicas": (serving_parts(settings, replica="replica-b"), obj, names),
        "unlearned, 1 of 3 replicas": (
            serving_parts(settings, replica="replica-b"),
            unlearned_pod,
            names,
        ),
        # - a known pod whose workload talks to PEERS others (peers.source):
        #   their nodes and zones pull it (steering/peer_pull.py).
        #   Their pods are where the watches show them (a webhook that
        #   follows bindings): its plan is kept while they stay.
        KNOWN_WITH_PEERS: (_following(serving_parts(peer_settings)), obj, None),
        # - ... or whose workload calls one server of SERVER_PODS pods: each
        #   of the server's nodes pulls it (looked up one by one).
        KNOWN_CALLING_SERVER: (_following(serving_parts(peer_settings)), obj, None),
        # - ... or whose workload PEERS others call through a Service routed
        #   by zone: the zones its own pods serve count too.
        KNOWN_SERVING_BY_ZONE: (_following(serving_parts(peer_settings)), obj, None),
    }


def _following(parts: Serving) -> Serving:
    """``parts`` as serving.py starts them where the watches of the steered
    and the unsteered pods have listed: the pull reads the placed pods."""
    listed = threading.Event()
    listed.set()
    parts.inflight.follow_places(listed)
    return parts


def measure(count: int, flush: CacheFlusher) -> dict[str, Timed]:
    """Each piece's (warm, cold) microseconds per call, round by round, at ``count`` nodes."""
    names = node_names(count)
    nodes = [node_from_json(obj) for obj in node_list(count)]
    settings = settings_from_mapping(
        {"prometheus": {"url": "http://synthetic.invalid"}, "metricsServer": {"enabled": False}}
    )
    measurer = Measurer(settings, lambda: nodes, SyntheticTraffic(names), None)  # type: ignore[arg-type]
    mixed_settings = dataclasses.replace(
        settings, scoring=dataclasses.replace(settings.scoring, mode="link-utilization")
    )
    mixed_traffic = SyntheticTraffic(names, speeds=MIXED_LINKS)
    mixed_measurer = Measurer(mixed_settings, lambda: nodes, mixed_traffic, None)  # type: ignore[arg-type]
    # A pod whose figure is known (annotated here; a learned figure takes the
    # same path): each admission is booked by that figure alone.
    body = json.dumps(review(pod(annotations={EXPECTED_BANDWIDTH: "1Mi"}))).encode()
    # The app and the Steerer decided alone book into the same in-flight
    # state, as every admission in a worker does.
    serving = serving_parts(settings)
    obj: Mapping[str, Any] = parse_review(json.loads(body)).obj or {}
    unlearned_pod = parse_review(review(pod())).obj or {}

    paths = _paths(settings, obj, unlearned_pod, names)
    talker = pod_workload(obj)
    assert talker is not None

    shape_of = {id(paths[label][0]): shape for label, shape in SHAPES.items()}

    mixed = paths[KNOWN_ON_MIXED_LINKS][0]

    def recorded(parts: Serving) -> RefreshOutcome:
        measured = (mixed_measurer if parts is mixed else measurer).measure()
        shape = shape_of.get(id(parts))
        return measured if shape is None else with_peers(measured, talker, shape)

    for parts, admitted, others in paths.values():
        parts.scoreboard.record(recorded(parts))
        # The other replicas' pods of an unlearned workload arrive with it
        # (BindingWatch books them so), and spread this replica's too.
        workload, unlearned = pod_workload(admitted), admitted is unlearned_pod
        for index in range(IN_FLIGHT):
            if others is not None and index % 3:
                replica = ("replica-a", "replica-c")[index % 3 - 1]
                node = others[index % len(others)]
                parts.inflight.book_seen(node, 2**20, time.time(), replica, workload, unlearned)
            else:
                parts.steerer.decide(admitted, None, False)

    def deciding(parts: Serving, admitted: Mapping[str, Any]) -> Callable[[], None]:
        def decide() -> None:
            parts.steerer.decide(admitted, None, False)

        return decide

    pieces: dict[str, Callable[[], None]] = {
        WEBHOOK: wsgi_post(create_app(settings, serving), body),
        BARE_FLASK: wsgi_post(create_bare_app(), body),
        BARE_WSGI: wsgi_post(bare_wsgi_app, body),
        **{
            f"Steerer.decide, {path}": deciding(parts, admitted)
            for path, (parts, admitted, _) in paths.items()
        },
    }
    result = {label: Timed([]) for label in pieces}
    labels = list(pieces)
    for round_number in range(ROUNDS):
        # Fresh scores (a round takes seconds): a stale snapshot would take the skip path.
        for parts in [serving, *(parts for parts, _, _ in paths.values())]:
            parts.scoreboard.record(recorded(parts))
        for label in labels if round_number % 2 == 0 else reversed(labels):
            call = pieces[label]
            result[label].rounds.append((warm_us(call), cold_us(call, flush)))
    return result


def verdict_of(checks: list[tuple[int, str, float, float]]) -> str:
    """Every path against a known pod's decision: (nodes, label, the larger
    of its median warm and cold ratios, its worst round's)."""
    worst = max((c for c in checks if c[0] == 5000), key=lambda check: check[2])
    with_peers = [c for c in checks if any(shape in c[1] for shape in SHAPES)]
    peers = max(with_peers, key=lambda check: check[2])
    return (
        f"Slowest path at 5,000 nodes with {IN_FLIGHT:,} pods in flight, peers included: "
        f"{worst[1]}, {worst[2]:.2f}x a known pod's decision (median of rounds; worst round "
        f"{worst[3]:.2f}x; goal: at most {MOST_RELATIVE}x): "
        + ("met." if worst[2] <= MOST_RELATIVE else "NOT met.")
        + " A known pod with peers, of any shape at either size, warm or cold: "
        f"{peers[2]:.2f}x (worst round {peers[3]:.2f}x; goal: at most {MOST_RELATIVE_PEERS}x): "
        + ("met." if peers[2] <= MOST_RELATIVE_PEERS else "NOT met.")
    )


def main(argv: list[str] | None = None) -> int:
    args = bench_parser(__doc__).parse_args(argv)
    started = time.time()
    flush = CacheFlusher()
    rows, checks = [], []
    for count in (100, 5000):
        figures = measure(count, flush)
        known = figures["Steerer.decide, known"]
        for label, timed in figures.items():
            warm, cold = timed.median()
            relative = " | "
            if label.startswith("Steerer.decide"):
                ratios = timed.ratios(known)
                warm_ratio = statistics.median(w for w, _ in ratios)
                cold_ratio = statistics.median(c for _, c in ratios)
                relative = f"{warm_ratio:.2f}x | {cold_ratio:.2f}x"
                worst = max(max(pair) for pair in ratios)
                checks.append((count, label, max(warm_ratio, cold_ratio), worst))
            rows.append(
                f"| {count:,} | {label} | {warm:.0f} µs | {cold:.0f} µs | {cold / warm:.1f}x "
                f"| {relative} |"
            )
        webhook_warm, webhook_cold = figures[WEBHOOK].median()
        for bare, what in ((BARE_FLASK, "bare flask app"), (BARE_WSGI, "bare WSGI callable")):
            bare_warm, bare_cold = figures[bare].median()
            rows.append(
                f"| {count:,} | webhook minus {what} | {webhook_warm - bare_warm:.0f} µs | "
                f"{webhook_cold - bare_cold:.0f} µs | | | |"
            )
    verdict = verdict_of(checks)
    elapsed = time.time() - started
    table = "\n".join(
        [
            "| nodes | what | warm caches | cold caches | cold / warm "
            "| ÷ known pod, warm | ÷ known pod, cold |",
            "|---|---|---|---|---|---|---|",
            *rows,
        ]
    )
    print(table)
    print(f"\n{verdict}\n{elapsed:.0f}s")
    if not args.no_write:
        write_section(
            "admission_cost",
            "What one admission costs, warm and cold",
            "python -m bench.admission_cost",
            "Both apps called as WSGI callables in one process, no sockets. The pieces take "
            f"turns: {ROUNDS} rounds, each timing every piece once, the order reversed every "
            f"other round. Warm: a tight loop of {WARM_CALLS:,} calls; cold: the median of "
            f"{COLD_CALLS:,} calls, each after a pass over 6 MiB and 60,000 Python objects, as "
            "the stack's own work between admissions leaves the caches under gunicorn and TLS. "
            "Times are medians of rounds; a path's ratio to a known pod's is taken within each "
            "round, its median shown. "
            "Scores from a synthetic source with the default settings. Each path is timed "
            f"with {IN_FLIGHT:,} pods admitted before it the same way and not measured yet: "
            "known (the pod carries an expected bandwidth, as one of a learned workload is "
            "booked; also on links of 1, 10 and 25 Gbit/s drawn at random, scored by "
            "utilisation), unlearned (a workload nothing is learned of, booked at the default), "
            "and either in one of 3 replicas (a third of the pods its own, the other two "
            "replicas' booked as its binding watch shows them), and known with peers "
            f"(peers.source istio: its workload talks to {PEERS} workloads of {PEER_PODS} pods "
            f"each, or calls one of {SERVER_PODS} pods with all its bytes and has "
            f"{CALLERS:,} pods, so that each of the server's nodes pulls every pod; every pod "
            "on a node drawn at random in three zones). The webhook and bare app "
            "rows post a known pod; the webhook answers it beneath flask, as it answers "
            "the API server (webhook/mutate.py), so the bare WSGI callable is its floor."
            f"\n\n{table}\n\n{verdict}\n\nRun time: {elapsed:.0f} s.",
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
