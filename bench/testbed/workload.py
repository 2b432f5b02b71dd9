"""What runs in the testbed: the pods' processes, the sinks they send to,
and the arrivals of one run.

- Bulk pods: ``iperf3`` clients sending to an ``iperf3`` server outside
  the nodes at a set rate (``-b``, and ``--fq-rate`` so the kernel paces
  the flow smoothly instead of in bursts: the gentlest neighbour a bulk
  sender can be). They send in the direction a hot node's link is full in,
  at 60% of a link: beside a data push, or another bulk pod, a bulk pod
  gets what TCP's share of the link leaves it, short of its rate.
- Latency pods: echo_client.c (bench/testbed/echo.py reads its records),
  1,000 small UDP requests a second to the UDP echo service of
  openbsd-inetd outside the nodes.
- Background: greedy uploads (``iperf3``, no rate, a 32 KiB socket buffer)
  run on some nodes outside any pod, a data push (a backup, a log shipper)
  that saturates the node's transmit link.
- A pod whose process exits at once (``false``): the kubelet stand-in marks
  it Failed.

The round-trip measurers (latency clients, the probe, the echo server) run
on a CPU of their own at a higher priority (bench/testbed/cpus.py).
"""

import hashlib
import os
import random
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from bench.testbed.compiled import compiled
from bench.testbed.cpus import measuring
from bench.testbed.network import WORLD_ADDRESS, WORLD_NAMESPACE

ECHO_PORT = 7  # echo, as /etc/services names it
IPERF_BASE_PORT = 5201
REQUEST_BYTES = 64
REQUESTS_PER_SECOND = 1000
ECHO_DURATION = 3600  # seconds: a latency pod runs until it is stopped
# IPv4 + UDP headers and the Ethernet frame around a request.
_WIRE_OVERHEAD = 20 + 8 + 18


@dataclass
class Arrival:
    """One pod of the run: when it is created and what it does."""

    at: float  # seconds after the run's arrivals start
    workload: str  # its Deployment
    kind: str  # "bulk" | "latency" | "exits"
    bits: float  # what it sends, bits/s (bulk: its target)
    annotated: bool = False  # carries nettraffic.io/expected-bandwidth
    cpu: float = 0.25  # cores requested
    memory: float = 0.25  # GiB requested
    revision: str = ""  # its Deployment's rollout: a new ReplicaSet each

    @property
    def template_hash(self) -> str:
        return hashlib.sha1((self.workload + self.revision).encode()).hexdigest()[:10]

    @property
    def replica_set(self) -> str:
        """Its ReplicaSet: kube-scheduler's default spread counts its pods
        alone (helper/spread.go, DefaultSelector: the selector of the
        ReplicaSet, which carries the pod-template-hash)."""
        return f"{self.workload}-{self.template_hash}"

    @property
    def annotations(self) -> dict[str, str] | None:
        if not self.annotated:
            return None
        return {"nettraffic.io/expected-bandwidth": f"{self.bits / 8 / 1000:.0f}k"}

    @property
    def container(self) -> dict[str, Any]:
        return {
            "name": self.kind,
            "image": "testbed/" + self.kind,
            "resources": {
                "requests": {
                    "cpu": f"{self.cpu * 1000:.0f}m",
                    "memory": f"{self.memory * 1024:.0f}Mi",
                }
            },
        }

    @property
    def bits_per_direction(self) -> np.ndarray:
        """[receive, transmit] bits/s on its node's link, as the optimum knows them."""
        if self.kind == "latency":
            return np.array([self.bits, self.bits])
        if self.kind == "bulk":
            return np.array([self.bits / 40, self.bits])  # ACKs back: one per two segments
        return np.zeros(2)


def latency_bits() -> float:
    return float(REQUESTS_PER_SECOND * (REQUEST_BYTES + _WIRE_OVERHEAD) * 8)


@dataclass
class Mix:
    """The arrivals of one run (the same for every placement policy)."""

    bulk_workloads: Sequence[tuple[str, str]] = (
        ("ingest-annotated", "annotated"),
        ("ingest-learned", "learned"),
        ("ingest-new", "new"),
    )
    bulk_per_workload: int = 1
    latency_pods: int = 8
    exiting_pods: int = 1
    # 60% of the default link: a bulk pod beside a data push or another bulk
    # pod falls short of it (at 20 Mbit/s every placement reached it: issue 61).
    bulk_bits: float = 30e6
    spread: float = 60.0  # seconds over which the pods arrive
    # The learned workload has one pod more, arriving this long before the
    # rest: a whole window of its traffic, then three learning rounds.
    learned_head_start: float = 25.0

    def arrivals(self, seed: int) -> list[Arrival]:
        rng = random.Random(seed)
        pods: list[Arrival] = []
        for workload, how in self.bulk_workloads:
            times = [rng.uniform(0, self.spread) for _ in range(self.bulk_per_workload)]
            if how == "learned":  # one more pod, sending long enough to be learned
                times.insert(0, -self.learned_head_start)
            pods += [
                Arrival(at, workload, "bulk", self.bulk_bits, annotated=how == "annotated")
                for at in times
            ]
        pods += [
            Arrival(rng.uniform(0, self.spread), "frontend", "latency", latency_bits(), cpu=0.1)
            for _ in range(self.latency_pods)
        ]
        pods += [
            Arrival(rng.uniform(0, self.spread), "crashloop", "exits", 0.0, cpu=0.1)
            for _ in range(self.exiting_pods)
        ]
        return sorted(pods, key=lambda a: a.at)


def _net_dev(pid: int, device: str = "eth0") -> tuple[int, int] | None:
    """(receive, transmit) bytes of ``device`` in the network namespace of ``pid``."""
    try:
        with open(f"/proc/{pid}/net/dev") as handle:
            for line in handle:
                name, _, rest = line.partition(":")
                if name.strip() == device:
                    fields_ = rest.split()
                    return int(fields_[0]), int(fields_[8])
    except (FileNotFoundError, ProcessLookupError, IndexError, ValueError):
        return None
    return None


@dataclass
class PodProcess:
    """A pod's process, started inside its network namespace."""

    process: "subprocess.Popen[bytes]"
    log_path: str
    latency_path: str | None = None
    last_counters: tuple[int, int] | None = None
    on_stop: Callable[[], None] | None = None  # once, after the process ended (its port back)

    def exited(self) -> bool:
        return self.process.poll() is not None

    def counters(self) -> tuple[int, int] | None:
        """(receive, transmit) bytes of the pod's eth0, its cAdvisor counters."""
        if not self.exited():
            found = _net_dev(self.process.pid)
            if found is not None:
                self.last_counters = found
        return self.last_counters

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.on_stop is not None:
            on_stop, self.on_stop = self.on_stop, None
            on_stop()


def in_namespace(namespace: str, argv: Sequence[str], log_path: str) -> "subprocess.Popen[bytes]":
    with open(log_path, "ab") as log:
        return subprocess.Popen(
            ["ip", "netns", "exec", namespace, *argv], stdout=log, stderr=subprocess.STDOUT
        )


class Sinks:
    """The servers outside the nodes: an echo server and iperf3 servers, one
    port per flow that may run at once (an iperf3 server serves one test at
    a time)."""

    def __init__(self, workdir: str, ports: int) -> None:
        self.processes: list[subprocess.Popen[bytes]] = []
        self.free = list(range(IPERF_BASE_PORT, IPERF_BASE_PORT + ports))
        log = os.path.join(workdir, "sinks.log")
        # inetd's built-in UDP echo answers in C for next to no CPU, where a
        # Python server answering 9,000 requests a second would compete with
        # the clients it answers.
        inetd_conf = os.path.join(workdir, "inetd.conf")
        with open(inetd_conf, "w") as handle:
            handle.write(f"{WORLD_ADDRESS}:echo dgram udp wait root internal\n")
        self.processes.append(
            in_namespace(
                WORLD_NAMESPACE, measuring(["inetd", "-i", "-R", "100000000", inetd_conf]), log
            )
        )
        for port in self.free:
            self.processes.append(
                in_namespace(WORLD_NAMESPACE, ["iperf3", "-s", "-p", str(port)], log)
            )
        time.sleep(0.5)  # listening before the first client connects

    def take_port(self) -> int:
        return self.free.pop(0)

    def give_back(self, port: int) -> None:
        self.free.append(port)

    def stop(self) -> None:
        for process in self.processes:
            process.terminate()
        for process in self.processes:
            try:
                process.wait(5)
            except subprocess.TimeoutExpired:
                process.kill()


def start_pod_process(
    kind: str, namespace: str, bits: float, workdir: str, name: str, port: int | None
) -> PodProcess:
    log = os.path.join(workdir, f"{name}.log")
    if kind == "bulk":
        rate = f"{bits:.0f}"
        argv = [
            "iperf3",
            "-c",
            WORLD_ADDRESS,
            "-p",
            str(port),
            "-b",
            rate,
            "--fq-rate",
            rate,
            "-t",
            "3600",
            "-i",
            "0",
        ]
        return PodProcess(in_namespace(namespace, argv, log), log)
    if kind == "latency":
        out = os.path.join(workdir, f"{name}.rtt")
        client = compiled("echo_client.c", workdir)
        argv = [client, WORLD_ADDRESS, str(ECHO_PORT), out, str(REQUESTS_PER_SECOND)]
        argv += [str(REQUEST_BYTES), str(ECHO_DURATION)]
        return PodProcess(in_namespace(namespace, measuring(argv), log), log, latency_path=out)
    return PodProcess(in_namespace(namespace, ["false"], log), log)


# The data push's socket buffer (iperf3 -w). It still takes the whole link,
# over a standing queue of 10-25 packets (2.4-6 ms at 50 Mbit/s). Left to
# the kernel's buffer autotuning, the queue now and then filled its 100
# packets for a while, and a hot link's p99 moved between 6 and 19 ms from
# run to run (docs/design/testbed.md, "The workload"; measured on the
# receive side, when the background downloaded).
DATA_PUSH_BUFFER = "32K"


def start_background(namespace: str, port: int, workdir: str, name: str) -> PodProcess:
    """A greedy upload from the node: its transmit link saturated."""
    log = os.path.join(workdir, f"{name}.log")
    argv = ["iperf3", "-c", WORLD_ADDRESS, "-p", str(port), "-w", DATA_PUSH_BUFFER]
    argv += ["-t", "3600", "-i", "0"]
    return PodProcess(in_namespace(namespace, argv, log), log)
