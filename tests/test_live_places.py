"""The peers' pull reads where the pods run now: the places the watches of
the steered and the unsteered pods keep (against the fake API server over
HTTP), not the learner's last pass, once both have listed them."""

import pytest

from harness.reviews import pod
from kubectl_nettraffic.inflight.placed import PlacedPods
from kubectl_nettraffic.kube.binding_watch import BindingWatch
from kubectl_nettraffic.kube.client import api_client
from kubectl_nettraffic.kube.service_routing import ZONE
from kubectl_nettraffic.kube.unsteered_pods import UnsteeredPods
from kubectl_nettraffic.kube.workloads import Workload, pod_template, pod_workload
from kubectl_nettraffic.learning.conversations import Conversations
from kubectl_nettraffic.steering.peer_pull import PullPlans
from tests.conftest import wait_for
from tests.harness.scoreboards import FixedBoard, peer_board

PODS = ("api/v1", "shop", "pods")
# Two nodes in each of zones a, b and c, the quietest in a.
LOADS = {f"{z}{i}": 1e6 * (i + 2 * k) for k, z in enumerate("abc") for i in (1, 2)}


def _pod(app: str, template: str, name: str = "", node: str = "") -> dict:
    """A pod of Deployment ``app`` (ReplicaSet ``app-template``) in shop;
    bound to ``node`` and running, if given."""
    made = pod(
        name=name,
        generate_name=f"{app}-{template}-",
        namespace="shop",
        labels={"app": app, "pod-template-hash": template},
    )
    if node:
        made["metadata"]["uid"] = name
        made["spec"]["nodeName"] = node
        made["status"] = {"phase": "Running"}
    return made


WEB = Workload("shop", "Deployment", "web")
API = Workload("shop", "Deployment", "api")


def _board(api_places: dict[str, int]) -> FixedBoard:
    """web calls api, routed by zone; the learner's last pass saw api on
    ``api_places`` and web on c2."""
    conversations = Conversations(
        {WEB: ((API, 6e6),), API: ((WEB, 6e6),)},
        {WEB: {"c2": 1}, API: api_places},
        0.0,
        calls=frozenset({(WEB, API)}),
        routing={API: ZONE},
    )
    return peer_board(LOADS, conversations, replica="replica1")


def _web_prefers(board: FixedBoard) -> str:
    """The zone of a new web pod's first preference (a dry run: nothing booked)."""
    decision = board.steerer.decide(_pod("web", "7d9c4b"), {}, dry_run=True)
    assert decision.preferences, decision
    return decision.preferences[0].node[0]


@pytest.fixture
def watches(fake_api, kubeconfig):
    started: list = []

    def start(board: FixedBoard) -> UnsteeredPods:
        api = api_client(kubeconfig)
        bindings = BindingWatch(api, board.inflight, "replica1", horizon=150.0)
        unsteered = UnsteeredPods(api, board.inflight)
        board.inflight.follow_places(bindings.synced, unsteered.synced)
        for watch in (bindings, unsteered):
            started.append(watch.start())
        return unsteered

    yield start
    for watch in started:
        watch.stop()


def test_a_client_follows_its_server_where_it_runs_now_not_where_the_pass_saw_it(fake_api, watches):
    """api ran in zone a at the learner's last pass; it has been rolled out
    to zone c since. web's pods go where api's keep their bytes in the zone."""
    board = _board({"a2": 1})
    moved = _pod("api", "6a7b8", "api-6a7b8-x1", "c1")
    assert pod_workload(moved) == API
    fake_api.put(moved)
    assert _web_prefers(board) == "a"  # the watches not started: the pass's places
    unsteered = watches(board)
    wait_for(board.inflight.places_followed)
    assert unsteered.placed == 1
    assert _web_prefers(board) == "c"
    # Rolled out again, to zone b: the next pod follows at once.
    fake_api.put(_pod("api", "7c8d9", "api-7c8d9-x1", "b2"))
    fake_api.delete(PODS, "api-6a7b8-x1")
    wait_for(lambda: unsteered.placed == 1 and _web_prefers(board) == "b")


def test_a_workload_with_no_pod_shown_keeps_the_pass_s_places(fake_api, watches):
    """The watches list no pod of api (another namespace's selector, say):
    its places stay those the learner saw."""
    board = _board({"b1": 1})
    watches(board)
    wait_for(board.inflight.places_followed)
    assert _web_prefers(board) == "b"


def test_a_server_rolled_out_counts_the_zones_its_new_pods_serve_already():
    """api serves web, routed by zone; web runs in zones a and b. api's
    rollout to ReplicaSet api-2 has placed one pod in zone a since the
    learner's pass (which saw none of api-2): its next pod saves web's
    bytes only in zone b, and again when that pod ends."""
    web, api = WEB, API
    conversations = Conversations(
        {web: ((api, 6e6),), api: ((web, 6e6),)},
        {web: {"a1": 1, "b1": 1}, api: {"c1": 2}},
        0.0,
        calls=frozenset({(web, api)}),
        routing={api: ZONE},
        templates={api: {"api-1": {"c1": 2}}},
    )
    board = _board({"c1": 2})
    plans = PullPlans(conversations, board.snapshot.nodes, board.steerer.settings.peers)
    placed = PlacedPods()
    placed.set_zones({name: name[0] for name in LOADS})
    for key, (workload, node) in enumerate([(web, "a1"), (web, "b1"), (api, "c1")]):
        placed.place(key, workload, None, node)
    new = pod_template(_pod("api", "2", "api-2-x1", "a2"))
    assert new == Workload("shop", "ReplicaSet", "api-2")
    placed.place(10, api, new, "a2")
    # The learner's pass alone: no pod of api-2 seen, every client zone counts.
    passed = plans.plan(api, "api-2")
    assert passed is not None and set(passed.in_zone) == {"a", "b"}
    first = plans.plan(api, "api-2", placed.live())
    assert first is not None and set(first.in_zone) == {"b"}
    # Unchanged places: the plan worked out once holds.
    assert plans.plan(api, "api-2", placed.live()) is first
    # Its pod in zone a ends (web's pods stay as they were): worked out again.
    placed.remove(10)
    again = plans.plan(api, "api-2", placed.live())
    assert again is not None and set(again.in_zone) == {"a", "b"}


def test_a_workload_counted_again_gets_a_later_stamp():
    placed = PlacedPods()
    web = Workload("shop", "Deployment", "web")
    placed.place(1, web, None, "a1")
    first = placed.live().stamps[web]
    placed.move(1, "b1")
    moved = placed.live().stamps[web]
    assert moved > first
    placed.remove(1)
    assert web not in placed.live().stamps and web not in placed.live().per_node
    placed.place(2, web, None, "a1")
    assert placed.live().stamps[web] > moved
