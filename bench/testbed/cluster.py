"""The testbed's control plane: an API server, a scheduler and a kubelet.

- API server: harness.fakeapi over real HTTP, holding the testbed's nodes
  and pods. A pod is created as the ReplicaSet controller creates it (a
  ``generateName``, its owner reference, the ``pod-template-hash`` label);
  with the webhook on, its AdmissionReview goes to the real webhook over
  TLS first and the patch it answers is applied. As in the API server, the
  name is generated after admission (apiserver's create handler runs
  mutating admission before the store's BeforeCreate names the object), and
  a webhook that fails or times out leaves the pod as it was
  (``failurePolicy: Ignore``).
- Scheduler: kube-scheduler's default profile as bench.scheduler_model
  models it (its rules cite the upstream functions), fed the pod's preferred
  terms as NodeAffinity scores them (``preferred_weights``). Pods are
  scheduled one at a time in creation order (queuesort/priority_sort.go,
  ``PrioritySort.Less``: priority, then the time the pod entered the
  queue), each bound ``bind_delay`` after its creation at the earliest, so
  a burst's pods are admitted before the first of them is bound. The
  optimum replaces this step: each pod goes where the exact class-blind
  optimum of the run's arrivals puts it (bench/testbed/optimum.py).
- Kubelet: a bound pod becomes a network namespace on its node and a
  process in it (bench.testbed.workload says which); its status goes to
  Running, or Failed when the process exits. Deleting the pod stops it.
"""

import base64
import copy
import json
import queue
import random
import string
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import jsonpatch
import numpy as np
import requests

from bench.scheduler_model import ClusterState, KubeScheduler
from bench.testbed.network import Network, TestbedNode
from bench.testbed.workload import Arrival, PodProcess
from harness.fakeapi import FakeKubeAPI, node
from harness.reviews import pod as pod_object
from harness.reviews import review

PODS = ("api/v1", "default", "pods")
NODE_CPU, NODE_MEMORY = 4.0, 16.0  # cores, GiB: every pod of a run fits anywhere
# The API server's default timeout for a webhook call (timeoutSeconds: 10).
WEBHOOK_TIMEOUT = 10.0


def _matches(expression: Mapping[str, Any], value: str | None) -> bool:
    """One node selector requirement (k8s.io/component-helpers, scheduling/
    corev1/nodeaffinity/nodeaffinity.go: the labels.Selector and
    fields.Selector a term compiles to). The product's own matcher
    (kubectl_nettraffic/kube/node_affinity.py) is not used on purpose: the
    scheduler stand-in judges the product's terms, so it must not share
    their code."""
    operator, values = expression.get("operator"), [str(v) for v in expression.get("values") or []]
    if operator == "In":
        return value in values
    if operator == "NotIn":
        return value not in values
    if operator == "Exists":
        return value is not None
    if operator == "DoesNotExist":
        return value is None
    if operator in ("Gt", "Lt") and value is not None and value.isdigit() and len(values) == 1:
        return int(value) > int(values[0]) if operator == "Gt" else int(value) < int(values[0])
    return False


def preferred_weights(pod: Mapping[str, Any], nodes: Sequence[Mapping[str, Any]]) -> dict[int, int]:
    """{node index: the summed weights of the pod's preferred terms it
    matches}: nodeaffinity/node_affinity.go, NodeAffinity.Score (``count +=
    int64(term.Weight)`` per matching term; an empty term matches nothing)."""
    affinity = ((pod.get("spec") or {}).get("affinity") or {}).get("nodeAffinity") or {}
    terms = affinity.get("preferredDuringSchedulingIgnoredDuringExecution") or []
    weights: dict[int, int] = {}
    for index, item in enumerate(nodes):
        name, labels = item["metadata"]["name"], item["metadata"].get("labels") or {}
        for term in terms:
            selector = term.get("preference") or {}
            expressions = selector.get("matchExpressions") or []
            fields_ = selector.get("matchFields") or []
            if not expressions and not fields_:
                continue
            if all(_matches(e, labels.get(e.get("key"))) for e in expressions) and all(
                _matches(e, name if e.get("key") == "metadata.name" else None) for e in fields_
            ):
                weights[index] = weights.get(index, 0) + int(term.get("weight", 0))
    return weights


@dataclass
class PlacedPod:
    """A pod of the run, from its admission to its deletion."""

    arrival: Arrival
    name: str
    created: float
    preferred: list[str] = field(default_factory=list)
    bandwidth_source: str = ""  # the webhook's nettraffic.io/bandwidth-source
    node: str | None = None
    bound: float | None = None
    process: PodProcess | None = None
    namespace: str | None = None  # its network namespace
    failed: bool = False  # its process ended by itself


class Placement:
    """Where a pod goes once created: kube-scheduler's model, or the
    optimum's ``plan`` ((arrival time, workload) -> node index)."""

    def __init__(
        self,
        policy: str,
        nodes: Sequence[TestbedNode],
        link_bits: float,
        seed: int,
        plan: Mapping[tuple[float, str], int] | None = None,
    ):
        self.policy, self.plan = policy, plan or {}
        size = len(nodes)
        self.state = ClusterState(
            np.full(size, NODE_CPU),
            np.full(size, NODE_MEMORY),
            np.zeros(size),
            np.zeros(size),
            np.zeros(size, dtype=np.int64),
        )
        self.scheduler = KubeScheduler(self.state, np.random.default_rng(seed))
        self.link_bits = link_bits
        # Every flow's true rate per node, both directions.
        self.known_bits = np.zeros((size, 2))

    def choose(
        self, pod: Mapping[str, Any], arrival: Arrival, api_nodes: Sequence[Mapping[str, Any]]
    ) -> int | None:
        if self.policy == "optimum":
            chosen = self.plan[(arrival.at, arrival.workload)]
            self.state.bind(chosen, arrival.replica_set, arrival.cpu, arrival.memory)
        else:
            chosen_or_none = self.scheduler.schedule(
                arrival.replica_set, arrival.cpu, arrival.memory, preferred_weights(pod, api_nodes)
            )
            if chosen_or_none is None:
                return None
            chosen = chosen_or_none
        self.known_bits[chosen] += arrival.bits_per_direction
        return chosen

    def add_background(self, index: int, bits: Sequence[float]) -> None:
        self.known_bits[index] += bits

    def remove(self, index: int, arrival: Arrival) -> None:
        self.known_bits[index] -= arrival.bits_per_direction
        self.state.unbind(index, arrival.replica_set, arrival.cpu, arrival.memory)


class ControlPlane:
    """API server, scheduler and kubelet for one placement policy's run."""

    def __init__(
        self,
        api: FakeKubeAPI,
        network: Network,
        placement: Placement,
        start_process: Callable[[PlacedPod, str], PodProcess],
        webhook: tuple[str, requests.Session] | None,
        bind_delay: tuple[float, float],
        rng: random.Random,
    ) -> None:
        self.api, self.network, self.placement = api, network, placement
        self.start_process, self.webhook = start_process, webhook
        self.bind_delay, self.rng = bind_delay, rng
        self._delays = random.Random(rng.random())  # the scheduler thread's own
        self.pods: list[PlacedPod] = []
        self.webhook_failures = 0
        self._pending: queue.Queue[PlacedPod | None] = queue.Queue()
        self._lock = threading.Lock()
        self._scheduler = threading.Thread(target=self._schedule_loop, daemon=True)
        self._scheduler.start()

    # ------------------------------------------------------------ API server

    def create(self, arrival: Arrival) -> PlacedPod:
        template_hash = arrival.template_hash
        obj = pod_object(
            generate_name=f"{arrival.workload}-{template_hash}-",
            labels={"app": arrival.workload, "pod-template-hash": template_hash},
            annotations=arrival.annotations,
            spec={"containers": [arrival.container]},
        )
        owner = obj["metadata"]["ownerReferences"][0]
        owner.update(name=arrival.replica_set, uid=f"uid-rs-{arrival.replica_set}")
        if self.webhook is not None:
            obj = self._admit(obj)
        suffix = "".join(self.rng.choice(string.ascii_lowercase + string.digits) for _ in range(5))
        obj["metadata"]["name"] = obj["metadata"].pop("generateName") + suffix
        stored = self.api.put(obj)
        annotations = stored["metadata"].get("annotations") or {}
        preferred = annotations.get("nettraffic.io/preferred-nodes", "")
        placed = PlacedPod(
            arrival,
            stored["metadata"]["name"],
            time.time(),
            [p for p in preferred.split(",") if p],
            bandwidth_source=annotations.get("nettraffic.io/bandwidth-source", ""),
        )
        with self._lock:
            self.pods.append(placed)
        self._pending.put(placed)
        return placed

    def _admit(self, obj: dict[str, Any]) -> dict[str, Any]:
        url, session = self.webhook  # type: ignore[misc]
        try:
            answer = session.post(url + "/mutate", json=review(obj), timeout=WEBHOOK_TIMEOUT)
            response = answer.json()["response"]
            if "patch" in response:
                patch = json.loads(base64.b64decode(response["patch"]))
                return jsonpatch.apply_patch(obj, patch)  # type: ignore[no-any-return]
        except (requests.RequestException, ValueError, KeyError, jsonpatch.JsonPatchException):
            self.webhook_failures += 1  # failurePolicy: Ignore
        return obj

    def delete(self, placed: PlacedPod) -> None:
        if placed.process is not None:
            placed.process.stop()
        if placed.namespace is not None:
            self.network.remove_pod(placed.namespace)
        if placed.node is not None:
            self.placement.remove(self._node_index(placed.node), placed.arrival)
        self.api.delete(PODS, placed.name)

    # ------------------------------------------------------------ scheduler

    def _node_index(self, name: str) -> int:
        return next(n.index - 1 for n in self.network.nodes if n.name == name)

    def _schedule_loop(self) -> None:
        while (placed := self._pending.get()) is not None:
            delay = self._delays.uniform(*self.bind_delay)
            time.sleep(max(0.0, placed.created + delay - time.time()))
            stored = self.api.get(PODS, placed.name)
            if stored is None:
                continue
            api_nodes = [
                self.api.get(("api/v1", None, "nodes"), n.name) or {} for n in self.network.nodes
            ]
            chosen = self.placement.choose(stored, placed.arrival, api_nodes)
            if chosen is None:
                continue  # Pending: nothing fits
            node_ = self.network.nodes[chosen]
            stored["spec"]["nodeName"] = node_.name
            self.api.put(stored)
            placed.node, placed.bound = node_.name, time.time()
            self._run(placed, node_, stored)

    # ------------------------------------------------------------ kubelet

    def _run(self, placed: PlacedPod, node_: TestbedNode, stored: dict[str, Any]) -> None:
        placed.namespace = self.network.add_pod(node_)
        placed.process = self.start_process(placed, placed.namespace)
        status = copy.deepcopy(stored)
        status["status"] = {"phase": "Running", "startTime": time.strftime("%Y-%m-%dT%H:%M:%SZ")}
        self.api.put(status)

    def poll_exits(self) -> int:
        """Mark pods whose process has ended Failed, as the kubelet reports
        them (restartPolicy aside: the testbed does not restart them)."""
        failed = 0
        with self._lock:
            pods = list(self.pods)
        for placed in pods:
            if placed.process is not None and placed.process.exited() and not placed.failed:
                placed.failed = True
                stored = self.api.get(PODS, placed.name)
                if stored is not None:
                    stored["status"] = {"phase": "Failed", "reason": "Error"}
                    self.api.put(stored)
                failed += 1
        return failed

    def stop(self) -> None:
        self._pending.put(None)
        self._scheduler.join(timeout=30)
        for placed in list(self.pods):
            self.delete(placed)


def node_object(testbed_node: TestbedNode) -> dict[str, Any]:
    """The Node object of a testbed node, as the API server returns it."""
    return node(
        testbed_node.name,
        ip=testbed_node.address,
        cpu=str(int(NODE_CPU)),
        memory=f"{int(NODE_MEMORY)}Gi",
    )
