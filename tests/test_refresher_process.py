"""The refresher process: a real child process refreshing from a real
Prometheus and a node file, feeding a scoreboard in this process."""

import json
import os
import pickle
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from harness.fakeapi import node
from harness.prometheus import Device, Exporter, free_port, prometheus_with_history
from kubectl_nettraffic.config import settings_from_mapping
from kubectl_nettraffic.measuring.refresher_process import RefresherProcess
from kubectl_nettraffic.scoring.node_scores import NodeScore
from kubectl_nettraffic.serving import Serving, serving_parts
from tests.conftest import wait_for
from tests.harness.scoreboards import adopted


@pytest.fixture(scope="module")
def prometheus():
    exporters = [
        Exporter(f"10.0.0.{i}:9100", f"n{i}", [Device("eth0", rate, rate)])
        for i, rate in ((1, 5e6), (2, 1e6), (3, 3e6), (4, 2e6))
    ]
    # History running into the future, so a query at "now" (the child's clock) finds it.
    server = prometheus_with_history(exporters, end=float(int(time.time()) + 600), duration=900)
    yield server
    server.stop()


def _write_nodes(path: str, count: int) -> None:
    items = [node(f"n{i}", ip=f"10.0.0.{i}") for i in range(1, count + 1)]
    with open(path, "w") as handle:
        json.dump({"apiVersion": "v1", "kind": "List", "items": items}, handle)


def _settings(prometheus_url: str, node_file: str, interval: str = "1s"):  # type: ignore[no-untyped-def]
    return settings_from_mapping(
        {
            "prometheus": {"url": prometheus_url},
            "metricsServer": {"enabled": False},
            "nodes": {"file": node_file},
            "refresh": {"interval": interval, "maxStaleness": "2m"},
        }
    )


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"  # a zombie has ended
    except FileNotFoundError:
        return False


@pytest.fixture
def start_refresher(tmp_path):
    """Writes a node file of ``nodes`` nodes, starts a refresher on it
    feeding serving parts; stopped after the test."""
    started: list[RefresherProcess] = []

    def start(prometheus_url: str, nodes: int) -> tuple[RefresherProcess, str, Serving]:
        node_file = str(tmp_path / "nodes.json")
        _write_nodes(node_file, nodes)
        settings = _settings(prometheus_url, node_file)
        serving = serving_parts(settings)
        started.append(RefresherProcess(settings, serving.scoreboard).start())
        return started[-1], node_file, serving

    yield start
    for refresher in started:
        refresher.stop()


def test_every_score_field_crosses_the_pipe_as_sent():
    # NodeScore pickles as a constructor call (for the serving process's load
    # time); every field, each with a value of its own, must come back in place.
    score = NodeScore(
        name="n1",
        receive=1.5,
        transmit=2.5,
        traffic=4.0,
        link_speed=1.25e9,
        link_utilization=None,
        cpu_ratio=0.5,
        memory_ratio=0.75,
        score=87.5,
        penalty_per_byte=1e-6,
        eligible=False,
        has_data=True,
        reason="cordoned",
    )
    back = pickle.loads(pickle.dumps(score, protocol=pickle.HIGHEST_PROTOCOL))
    assert type(back) is NodeScore
    assert back == score


def test_child_feeds_the_scoreboard_and_sends_nodes_only_when_they_change(
    prometheus, start_refresher
):
    refresher, node_file, serving = start_refresher(prometheus.url, 3)
    board = refresher.scoreboard
    first = wait_for(lambda: board.snapshot, timeout=30)
    assert first.source == "prometheus"
    assert [s.name for s in first.scores] == ["n2", "n3", "n1"]
    assert refresher.pid is not None and refresher.pid != os.getpid()
    second = wait_for(lambda: board.snapshot is not first and board.snapshot, timeout=10)
    # Unchanged nodes were left out of the message and the earlier mapping reused.
    assert second.nodes is first.nodes
    assert set(second.nodes) == {"n1", "n2", "n3"}
    # The in-flight state follows each snapshot the link publishes.
    assert adopted(serving.inflight) is second

    time.sleep(0.01)  # a new mtime, so the child's file source reads it again
    _write_nodes(node_file, 4)
    grown = wait_for(lambda: "n4" in board.snapshot.nodes and board.snapshot, timeout=10)
    assert [s.name for s in grown.scores] == ["n2", "n4", "n3", "n1"]
    refresher.stop()
    assert not _alive(refresher.pid)


def test_failures_in_the_child_are_counted_in_the_parent(start_refresher):
    refresher, _, _ = start_refresher(f"http://127.0.0.1:{free_port()}", 2)  # nothing listens
    board = refresher.scoreboard
    wait_for(lambda: board.source_failures["prometheus"] >= 2, timeout=30)
    assert board.snapshot is None
    assert board.last_errors and "unreachable" in board.last_errors[0]


def test_a_child_that_dies_is_started_again(prometheus, start_refresher):
    refresher, _, _ = start_refresher(prometheus.url, 3)
    board = refresher.scoreboard
    before = wait_for(lambda: board.snapshot, timeout=30)
    first_pid = refresher.pid
    os.kill(first_pid, signal.SIGKILL)
    wait_for(lambda: refresher.restarts == 1 and refresher.pid != first_pid, timeout=10)
    after = wait_for(
        lambda: board.snapshot.generated_at > before.generated_at + 1 and board.snapshot,
        timeout=30,
    )
    assert set(after.nodes) == {"n1", "n2", "n3"}  # the new child sent its nodes again
    assert not _alive(first_pid)


def test_the_child_ends_when_the_serving_process_is_killed(prometheus, tmp_path):
    node_file = str(tmp_path / "nodes.json")
    _write_nodes(node_file, 3)
    parent = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(
                f"""
                import time
                from kubectl_nettraffic.measuring.refresher_process import RefresherProcess
                from kubectl_nettraffic.measuring.scoreboard import Scoreboard
                from tests.test_refresher_process import _settings
                # A long interval: the child is waiting, not sending, when its parent dies.
                settings = _settings({prometheus.url!r}, {node_file!r}, interval="60s")
                refresher = RefresherProcess(settings, Scoreboard(settings)).start()
                while refresher.scoreboard.snapshot is None:
                    time.sleep(0.05)
                print(refresher.pid, flush=True)
                time.sleep(120)
                """
            ),
        ],
        stdout=subprocess.PIPE,
        text=True,
        cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
    )
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        assert _alive(child)
        parent.kill()  # no atexit, no clean-up: only the pipe tells the child
        parent.wait(10)
        wait_for(lambda: not _alive(child), timeout=10)
    finally:
        parent.kill()
        parent.wait(10)


def test_the_learned_table_crosses_the_pipe_only_after_a_learning_round():
    from dataclasses import replace

    from kubectl_nettraffic.kube.workloads import Workload
    from kubectl_nettraffic.learning.workload_bandwidth import LearnedBandwidth
    from kubectl_nettraffic.measuring.measurement import RefreshOutcome
    from kubectl_nettraffic.measuring.refresher_process import RefresherProcess, encode_message
    from kubectl_nettraffic.measuring.scoreboard import Scoreboard
    from tests.harness.scoreboards import fixed_board

    board = fixed_board({"a": 0.0, "b": 1e6})
    first = LearnedBandwidth({Workload("shop", "Deployment", "web"): 4e7}, 1e6, 1000.0)
    snapshot = replace(board.snapshot, learned=first)
    # Not started: fed by hand, as its link does.
    parent = RefresherProcess(board.settings, Scoreboard(board.settings))
    sent_nodes, sent_learned = None, None
    for learned in (first, first, LearnedBandwidth({}, 2e6, 1015.0)):
        outcome = RefreshOutcome(replace(snapshot, learned=learned), (), (), 0.1)
        data = encode_message(outcome, sent_nodes, sent_learned)
        message = pickle.loads(data)
        assert message.same_learned == (learned is sent_learned)
        parent._deliver(message)
        assert parent.scoreboard.snapshot.learned == learned
        sent_nodes, sent_learned = outcome.snapshot.nodes, learned


def test_the_conversations_cross_the_pipe_only_when_they_change():
    """A learning round sends a new table; its conversations (the pairs and
    the pods' nodes, read once a learner pass) go only when they are new."""
    from dataclasses import replace

    from kubectl_nettraffic.kube.workloads import Workload
    from kubectl_nettraffic.learning.conversations import Conversations
    from kubectl_nettraffic.learning.workload_bandwidth import LearnedBandwidth
    from kubectl_nettraffic.measuring.measurement import RefreshOutcome
    from kubectl_nettraffic.measuring.refresher_process import RefresherProcess, encode_message
    from kubectl_nettraffic.measuring.scoreboard import Scoreboard
    from tests.harness.scoreboards import fixed_board

    web, api = Workload("shop", "Deployment", "web"), Workload("shop", "Deployment", "api")
    talks = Conversations({web: ((api, 1e6),), api: ((web, 1e6),)}, {web: {"a": 2}}, 990.0)
    again = Conversations({web: ((api, 2e6),), api: ((web, 2e6),)}, {web: {"b": 2}}, 1020.0)
    board = fixed_board({"a": 0.0, "b": 1e6})
    parent = RefresherProcess(board.settings, Scoreboard(board.settings))
    sent_nodes, sent_learned = None, None
    rounds = [
        LearnedBandwidth({web: 4e7}, 1e6, 1000.0, talks),
        LearnedBandwidth({web: 5e7}, 1e6, 1015.0, talks),  # a new round, the same pairs
        LearnedBandwidth({web: 5e7}, 1e6, 1030.0, again),
    ]
    for number, learned in enumerate(rounds):
        outcome = RefreshOutcome(replace(board.snapshot, learned=learned), (), (), 0.1)
        message = pickle.loads(encode_message(outcome, sent_nodes, sent_learned))
        assert message.same_conversations == (number == 1)
        if message.same_conversations:
            assert message.outcome.snapshot.learned.conversations is None  # not on the wire
        parent._deliver(message)
        assert parent.scoreboard.snapshot.learned == learned
        sent_nodes, sent_learned = outcome.snapshot.nodes, learned


def test_only_the_nodes_that_changed_cross_the_pipe():
    from dataclasses import replace

    from kubectl_nettraffic.kube.nodes import Node
    from kubectl_nettraffic.measuring.measurement import RefreshOutcome
    from kubectl_nettraffic.measuring.refresher_process import RefresherProcess, encode_message
    from kubectl_nettraffic.measuring.scoreboard import Scoreboard
    from tests.harness.scoreboards import fixed_board

    names = [f"n{i}" for i in range(10)]
    board = fixed_board(dict.fromkeys(names, 0.0))
    first = {name: Node(name, {"zone": "a"}) for name in names}
    relabelled = {**first, "n3": Node("n3", {"zone": "a", "nettraffic.io/tier": "busy"})}
    del relabelled["n7"]
    relabelled["n10"] = Node("n10", {})
    renamed_most = {name: Node(name, {"zone": "b"}) for name in names}
    parent = RefresherProcess(board.settings, Scoreboard(board.settings))
    sent, previous = None, None
    # (mapping, what crosses: None for the whole mapping, else (changed, removed))
    for nodes, crossing in (
        (first, None),
        (first, ((), ())),
        (relabelled, (("n10", "n3"), ("n7",))),
        (renamed_most, None),
    ):
        outcome = RefreshOutcome(replace(board.snapshot, nodes=nodes), (), (), 0.1)
        data = encode_message(outcome, sent)
        message = pickle.loads(data)
        changes = message.node_changes
        if crossing is None:
            assert changes is None and message.outcome.snapshot.nodes == nodes
        else:
            assert (tuple(sorted(changes.changed)), changes.removed) == crossing
            assert message.outcome.snapshot.nodes == {}
        parent._deliver(message)
        assert parent.scoreboard.snapshot.nodes == nodes
        if crossing == ((), ()):  # nothing changed: the mapping already held is reused
            assert parent.scoreboard.snapshot.nodes is previous
        previous, sent = parent.scoreboard.snapshot.nodes, nodes
    # A delta with no mapping to apply it to is refused, not guessed at.
    fresh = RefresherProcess(board.settings, Scoreboard(board.settings))
    with pytest.raises(ValueError, match="without a node list"):
        relabelled_outcome = RefreshOutcome(replace(board.snapshot, nodes=relabelled), (), (), 0.1)
        fresh._deliver(pickle.loads(encode_message(relabelled_outcome, first)))
