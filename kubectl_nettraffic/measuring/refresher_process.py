"""The scoreboard's refresher in a process of its own.

A refresh is Python work that grows with the cluster: reading, decoding
and attributing the Prometheus answer and scoring every node (its CPU time
at 5,000 nodes: python -m bench.engine). Run in the webhook's serving
process it would hold the GIL that every admission needs, and admissions
would slow for as long as it lasted, every refresh interval. Here it runs in a child process, on another core; the
serving process only receives the outcome: one pickled message per refresh,
carrying only the node objects that changed since the last message (they
rarely change; scores always do; traffic tiers relabel a few at a time).
Loading it at 5,000 nodes is the
serving process's one sizeable piece of work per refresh (bench.engine).

The child builds its own engine from the same Settings (node inventory,
Prometheus and metrics-server clients), so it measures exactly what an
in-process refresher would. The serving process publishes each outcome
through ``Scoreboard.record``: the snapshot swap, failure counts and the
in-flight state stay where the admissions are.

Lifetime: the child is spawned, not forked (the serving process has threads
by then), and ends when its end of the pipe reports the parent gone, so a
killed webhook leaves no orphan behind. If the child dies, it is started
again after a pause that doubles up to the refresh interval; meanwhile the
current snapshot ages toward stale as with any failing source.
"""

import logging
import multiprocessing
import pickle
import signal
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING, Any

from kubectl_nettraffic.config import Settings
from kubectl_nettraffic.errors import NetTrafficError
from kubectl_nettraffic.kube.nodes import Node
from kubectl_nettraffic.measuring.measurement import Measurer, RefreshOutcome
from kubectl_nettraffic.measuring.scoreboard import Scoreboard

if TYPE_CHECKING:
    from kubectl_nettraffic.measuring.tier_labels import TierLabeller

log = logging.getLogger(__name__)

# A restarted child that then ran this long counts as healthy again: the next
# failure waits the shortest pause, not the longest.
_HEALTHY_AFTER = 60.0
_FIRST_PAUSE = 1.0


@dataclass(frozen=True)
class NodeChanges:
    """The node mapping as changes to the one last sent: nodes added or
    changed, and the names of nodes gone."""

    changed: Mapping[str, Node]
    removed: tuple[str, ...] = ()

    def apply(self, nodes: Mapping[str, Node]) -> Mapping[str, Node]:
        """``nodes`` changed, as a new mapping (older snapshots hold ``nodes``);
        unchanged, ``nodes`` itself."""
        if not self.changed and not self.removed:
            return nodes
        updated = {**nodes, **self.changed}
        for name in self.removed:
            updated.pop(name, None)
        return updated


@dataclass(frozen=True)
class _Message:
    """One refresh's outcome on the wire. ``node_changes``: its snapshot's
    node mapping was left out, these changes to the one last sent stand for
    it; ``same_learned``: its learned bandwidth table was, being the one
    last sent (no learning round since; its size at 15,000 workloads:
    python -m bench.learning); ``same_conversations``: a new table's
    conversations were, being those last sent (they change once a learner
    pass; 1.8 MiB at 150,000 pods: python -m bench.peer_learning)."""

    outcome: RefreshOutcome
    node_changes: NodeChanges | None = None
    same_learned: bool = False
    same_conversations: bool = False


def node_changes(nodes: Mapping[str, Node], sent: Mapping[str, Node]) -> NodeChanges | None:
    """``nodes`` as changes to ``sent``; None when sending them whole is as small."""
    changed = {name: node for name, node in nodes.items() if sent.get(name) != node}
    removed = tuple(name for name in sent if name not in nodes)
    if len(changed) + len(removed) >= max(1, len(nodes) // 2):
        return None
    return NodeChanges(changed, removed)


def _compact(
    outcome: RefreshOutcome, sent: Mapping[str, Node] | None, sent_learned: object = None
) -> _Message:
    snapshot = outcome.snapshot
    if snapshot is None:
        return _Message(outcome)
    changes = node_changes(snapshot.nodes, sent) if sent is not None else None
    learned = snapshot.learned
    same_learned = learned is not None and learned is sent_learned
    conversations = None if learned is None else learned.conversations
    same_conversations = (
        not same_learned
        and conversations is not None
        and conversations is getattr(sent_learned, "conversations", None)
    )
    if changes is not None:
        snapshot = replace(snapshot, nodes={})
    if same_learned:
        snapshot = replace(snapshot, learned=None)
    elif same_conversations and learned is not None:
        snapshot = replace(snapshot, learned=replace(learned, conversations=None))
    return _Message(replace(outcome, snapshot=snapshot), changes, same_learned, same_conversations)


def encode_message(
    outcome: RefreshOutcome, sent: Mapping[str, Node] | None, sent_learned: object = None
) -> bytes:
    """One refresh's outcome as the child sends it; ``sent`` and
    ``sent_learned`` are the node mapping and learned table of the last
    message: of the nodes, only the changes to it are sent; the table is
    left out when unchanged. The serving process loads
    it with ``pickle.loads``, holding the GIL its admissions need
    (``python -m bench.engine`` times that load)."""
    return pickle.dumps(_compact(outcome, sent, sent_learned), protocol=pickle.HIGHEST_PROTOCOL)


def _run_child(settings: Settings, conn: Connection) -> None:
    """The child's main: refresh, send, wait; until the parent is gone."""
    from kubectl_nettraffic.measuring.engine import build_engine

    logging.basicConfig(
        level=settings.server.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s [refresher] %(message)s",
        stream=sys.stderr,
    )
    try:
        engine = build_engine(settings)
    except NetTrafficError as error:  # the parent logs the exit and starts another later
        log.error("refresher cannot start: %s", error)
        sys.exit(1)
    measurer = engine.measurer
    labeller = None
    if settings.steering.traffic_tiers and engine.api is not None and engine.node_watch is not None:
        from kubectl_nettraffic.measuring.tier_labels import tier_labeller

        labeller = tier_labeller(settings, engine.api).start()
    # When the serving process exits, multiprocessing ends this (daemonic)
    # child with SIGTERM, whose default action would kill it on the spot: a
    # held Lease would be left to expire, and after every rolling update the
    # next replica would wait out its 15 s before labelling. Unwinding instead
    # runs the ``finally`` below.
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    try:
        _refresh_until_parent_gone(settings, conn, measurer, labeller)
    finally:
        if labeller is not None:
            labeller.stop()  # releases a held Lease: the next leader need not wait it out


def _exit_on_sigterm(signum: int, frame: object) -> None:
    raise SystemExit(0)


def _refresh_until_parent_gone(
    settings: Settings, conn: Connection, measurer: Measurer, labeller: "TierLabeller | None"
) -> None:
    sent: Mapping[str, Node] | None = None  # the node mapping in the last message
    sent_learned: object = None  # and the learned table
    while True:
        try:
            outcome = measurer.measure()
        except Exception:  # never let the refresher die; the next tick retries
            log.exception("refresh failed unexpectedly")
            outcome = RefreshOutcome(None, (), ("refresh failed unexpectedly; see the log",), 0.0)
        if labeller is not None:
            outcome = replace(outcome, tier_labels=labeller.status())
        try:
            conn.send_bytes(encode_message(outcome, sent, sent_learned))
        except OSError:
            return  # the parent is gone
        if outcome.snapshot is not None:
            sent, sent_learned = outcome.snapshot.nodes, outcome.snapshot.learned
        if labeller is not None:
            labeller.offer(outcome.snapshot)  # labelled after the send: scores first
        # The parent never writes: the pipe turns readable only when its end
        # closes, so this is both the interval and the parent's death notice.
        if conn.poll(settings.refresh.interval):
            return


class RefresherProcess:
    """Feeds ``scoreboard`` from a child process that refreshes every interval."""

    def __init__(self, settings: Settings, scoreboard: Scoreboard) -> None:
        self.settings = settings
        self.scoreboard = scoreboard
        self._context = multiprocessing.get_context("spawn")
        self._process: Any = None
        self._conn: Connection | None = None
        self._nodes: Mapping[str, Node] | None = None  # the node mapping, as last sent
        self._learned: Any = None  # and the learned table
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self.restarts = 0

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def start(self) -> "RefresherProcess":
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="refresher-link", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._conn is not None:
            self._conn.close()  # the child sees its pipe close and ends
        self._reap()

    def _spawn(self) -> Connection:
        ours, theirs = self._context.Pipe()
        self._process = self._context.Process(
            target=_run_child,
            args=(self.settings, theirs),
            name="nettraffic-refresher",
            daemon=True,
        )
        self._process.start()
        theirs.close()  # only the child holds its end: its exit reads as end of file here
        self._nodes = self._learned = None  # a new child sends both again
        self._conn = ours
        return ours

    def _reap(self) -> int | None:
        """End the child if it still runs; its exit code (None if it never started)."""
        process = self._process
        if process is None or process.pid is None:
            return None
        process.join(5)
        if process.is_alive():
            process.terminate()
            process.join(5)
        exitcode: int | None = process.exitcode
        return exitcode

    def _deliver(self, message: _Message) -> None:
        outcome = message.outcome
        snapshot = outcome.snapshot
        if snapshot is not None:
            if message.node_changes is not None:
                if self._nodes is None:
                    raise ValueError("the refresher sent node changes without a node list")
                self._nodes = message.node_changes.apply(self._nodes)
                outcome = replace(outcome, snapshot=replace(snapshot, nodes=self._nodes))
            else:
                self._nodes = snapshot.nodes
            if message.same_learned:
                outcome = replace(
                    outcome, snapshot=replace(outcome.snapshot or snapshot, learned=self._learned)
                )
            else:
                learned = snapshot.learned
                if message.same_conversations and learned is not None:
                    kept = getattr(self._learned, "conversations", None)
                    learned = replace(learned, conversations=kept)
                    outcome = replace(
                        outcome, snapshot=replace(outcome.snapshot or snapshot, learned=learned)
                    )
                self._learned = learned
        self.scoreboard.record(outcome)

    def _receive(self, conn: Connection) -> None:
        while not self._stopping.is_set():
            data = conn.recv_bytes()  # waits without the GIL
            self._deliver(pickle.loads(data))

    def _run(self) -> None:
        pause = _FIRST_PAUSE
        while not self._stopping.is_set():
            started = time.monotonic()
            try:
                self._receive(self._spawn())
            except (EOFError, OSError):
                pass  # the child ended, or stop() closed the pipe
            except Exception:  # a message we cannot use, or a child we cannot start
                log.exception("lost the refresher process")
            if self._stopping.is_set():
                return
            if self._conn is not None:
                self._conn.close()  # a child still running sees its pipe close and ends
            exitcode = self._reap()
            if time.monotonic() - started > _HEALTHY_AFTER:
                pause = _FIRST_PAUSE
            log.warning(
                "refresher process ended (exit code %s); starting another in %.0fs",
                exitcode,
                pause,
            )
            self.restarts += 1
            self._stopping.wait(pause)
            pause = min(pause * 2, max(_FIRST_PAUSE, self.settings.refresh.interval))
