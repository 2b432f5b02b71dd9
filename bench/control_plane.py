"""The control plane's timing for the placement simulation: when the pods of
a scale-up are admitted, and when each webhook replica's binding watch
shows them created and bound.

Each rule follows the component it stands in for:

- The ReplicaSet controller creates a scale-up's pods in slow-start
  batches of 1, 2, 4, 8, ... (kubernetes pkg/controller/replicaset/
  replica_set.go, slowStartBatch with controller.SlowStartInitialBatchSize
  1): the calls of one batch run at once, and the next batch starts when
  the last call of this one has returned. Its client is rate-limited by
  kube-controller-manager's --kube-api-qps 20 and --kube-api-burst 30 (a
  token bucket, client-go flowcontrol). A pod is admitted when its create
  call is sent; the call returns CREATE_LATENCY later (an assumption: the
  API server's median for a pod create with one webhook; its SLO is a p99
  under a second).
- kube-scheduler takes pods from its queue in the order they were created
  (equal priority: queuesort's PrioritySort.Less orders by priority, then
  by the time the pod was queued) and binds one at a time; its client is
  limited to 50 requests a second (KubeSchedulerConfiguration's
  clientConnection.qps default). So a pod's binding never shows before the
  binding of a pod created before it, nor sooner than 1/50 s after it.
- The binding delay, from a pod's admission until a watch shows it bound,
  is the dimension the benchmark varies: drawn per pod around the row's
  median (log-normal, sigma BINDING_SPREAD). 0 is "at once": the same
  slow-start admissions, each pod shown created and bound the instant it
  is admitted.
- A watch shows an event WATCH_LATENCY after it happened (each replica its
  own draw).

What it leaves out: the scheduler's decision is made at admission, in the
same order (the scheduler's own state, requests and spreading, depends
only on that order; traffic-tier labels could change between admission
and binding, at most once a refresh); a pod starts sending
steering.podStartup after its admission, not after its binding; no API
call fails or is retried.
"""

import math
from dataclasses import dataclass

import numpy as np

SLOW_START_INITIAL_BATCH = 1  # controller.SlowStartInitialBatchSize
CONTROLLER_QPS, CONTROLLER_BURST = 20.0, 30  # kube-controller-manager --kube-api-qps/-burst
SCHEDULER_QPS = 50.0  # KubeSchedulerConfiguration clientConnection.qps
CREATE_LATENCY = 0.020  # s, median of a pod create call (assumed)
WATCH_LATENCY = 0.005  # s, median from an event to a watch showing it (assumed)
BINDING_SPREAD = 0.5  # sigma of the binding delay's log-normal


@dataclass(frozen=True)
class PodTimes:
    admitted: float
    created: float  # the create call returned: the pod is stored
    bound: float  # the binding is stored


def scale_up(
    pods: int,
    start: float,
    binding_delay: float,
    rng: np.random.Generator,
    delays: np.random.Generator,
) -> list[PodTimes]:
    """The times of a ReplicaSet scale-up of ``pods`` pods from ``start``,
    in admission order. The admissions are drawn from ``rng``, the binding
    delays from ``delays``: runs that differ only by the binding delay
    admit every burst at the same times."""
    admitted, created = _slow_start(pods, start, rng)
    if binding_delay <= 0:
        return [PodTimes(t, t, t) for t in admitted]
    times = []
    last_bound = -math.inf
    for admission, stored in zip(admitted, created, strict=True):
        delay = binding_delay * float(delays.lognormal(0.0, BINDING_SPREAD))
        bound = max(stored, admission + delay, last_bound + 1.0 / SCHEDULER_QPS)
        last_bound = bound
        times.append(PodTimes(admission, stored, bound))
    return times


def _slow_start(
    pods: int, start: float, rng: np.random.Generator
) -> tuple[list[float], list[float]]:
    """Admission and creation times of slowStartBatch's calls, through the
    controller's token bucket."""
    tokens, refilled = float(CONTROLLER_BURST), start  # client-go's token bucket
    admitted: list[float] = []
    created: list[float] = []
    batch, at = SLOW_START_INITIAL_BATCH, start
    while len(admitted) < pods:
        size = min(batch, pods - len(admitted))
        returned = at
        for _ in range(size):
            # The batch's calls queue on the limiter: each waits for a token.
            asked = max(at, refilled)
            tokens = min(CONTROLLER_BURST, tokens + (asked - refilled) * CONTROLLER_QPS)
            wait = 0.0 if tokens >= 1 else (1 - tokens) / CONTROLLER_QPS
            sent = asked + wait
            tokens, refilled = tokens + wait * CONTROLLER_QPS - 1, sent
            stored = sent + CREATE_LATENCY * float(rng.lognormal(0.0, 0.5))
            admitted.append(sent)
            created.append(stored)
            returned = max(returned, stored)
        batch, at = 2 * size, returned
    order = sorted(range(pods), key=admitted.__getitem__)
    return [admitted[i] for i in order], [created[i] for i in order]


def watch_latency(binding_delay: float, rng: np.random.Generator) -> float:
    """How long after an event a watch shows it; none in the at-once model."""
    return 0.0 if binding_delay <= 0 else WATCH_LATENCY * float(rng.lognormal(0.0, 0.5))
