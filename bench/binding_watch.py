"""What following bindings costs: the BindingWatch of one replica while the
webhook's replicas steer 1,000 pods/s between them; and the watch of the
pods no replica steered (UnsteeredPods) reading 1,000 such pods/s.

The fake API server of harness/fakeapi.py, in another process (plain HTTP
on 127.0.0.1), stores the pods as they change and streams the watch events
they cause, paced in real time: per pod, ADDED when
it is created (unbound), MODIFIED when the scheduler binds it (nodeName and
the PodScheduled condition in one update, as the binding subresource
writes them), and two MODIFIED from the kubelet's status updates
(ContainerCreating, then Running). Half the pods are bound to a node other
than their booked one. The pods are shaped as the API server sends a
Deployment's pod (managedFields, the service-account token volume, status),
about 5 KB each. The watch runs as in the webhook: the real Reflector,
BindingWatch and in-flight state of a replica with its id (so the replica
share and the watch delay are kept as in production), in this process; its
CPU is this process's CPU over the run. With 2 or 3 replicas the same 1,000
pods/s are shared among them: the watching replica books its own share at
admission (before the run) and the others' from the watch (each pod
labelled with its replica's id).

    python -m bench.binding_watch
"""

import copy
import json
import logging
import multiprocessing
import os
import time
from typing import Any

import yaml

from bench.admission_cost import SyntheticTraffic
from bench.fixtures import node_list, node_names
from bench.report import bench_parser, write_section
from harness.fakeapi import FakeKubeAPI
from harness.reviews import pod as pod_object
from kubectl_nettraffic.config import settings_from_mapping
from kubectl_nettraffic.kube.binding_watch import BindingWatch
from kubectl_nettraffic.kube.client import api_client
from kubectl_nettraffic.kube.nodes import node_from_json
from kubectl_nettraffic.kube.pods import BOOKING, STEERED_BY
from kubectl_nettraffic.kube.unsteered_pods import UnsteeredPods
from kubectl_nettraffic.measuring.measurement import Measurer
from kubectl_nettraffic.serving import serving_parts

RATE, SECONDS, NODES = 1000, 10, 5000
REPLICA_ID = "0123456789"
BATCH = 0.01  # events are written in 10 ms batches


def _pod(index: int, replica: str = REPLICA_ID) -> dict[str, Any]:
    """A Deployment's pod as the API server stores it, unbound: the admitted
    pod (harness/reviews.py) as the webhook steered it (``replica`` "": as
    none did), plus what the API server adds (uid, managedFields, the
    service-account token volume)."""
    stamp = "2026-11-23T10:00:00Z"
    preferred = ("node-00001", "node-00002", "node-00003")
    labels = {"app": "web", "pod-template-hash": "7d9c4b6f5"}
    if replica:
        labels[STEERED_BY] = replica
    pod = pod_object(
        generate_name="web-7d9c4b6f5-",
        labels=labels,
        annotations=None
        if not replica
        else {
            "nettraffic.io/preferred-nodes": ",".join(preferred),
            "nettraffic.io/scored-at": stamp,
            "nettraffic.io/source": "prometheus",
            "nettraffic.io/scores": "node-00001=97,node-00002=96,node-00003=96",
            BOOKING: str(index + 1),
            "nettraffic.io/booked-bandwidth": "1048576",
        },
        spec={
            "serviceAccount": "default",
            "affinity": {
                "nodeAffinity": {
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {
                            "weight": weight,
                            "preference": {
                                "matchFields": [
                                    {"key": "metadata.name", "operator": "In", "values": [name]}
                                ]
                            },
                        }
                        for weight, name in zip((100, 99, 99), preferred, strict=True)
                    ]
                }
            },
        },
    )
    metadata, spec = pod["metadata"], pod["spec"]
    metadata.update(
        name=f"web-7d9c4b6f5-{index:06d}",
        uid=f"6f1c2a44-0000-4000-8000-{index:012d}",
        resourceVersion="0",
        creationTimestamp=stamp,
    )
    metadata["managedFields"] = _managed_fields(metadata["ownerReferences"][0]["uid"], stamp)
    spec["volumes"] = [_token_volume()]
    container = spec["containers"][0]
    container.update(
        ports=[{"containerPort": 8080, "protocol": "TCP"}],
        resources={"requests": {"cpu": "100m", "memory": "128Mi"}},
        volumeMounts=[
            {
                "name": "kube-api-access-x7k2p",
                "readOnly": True,
                "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
            }
        ],
    )
    pod["status"] = {"phase": "Pending", "qosClass": "Burstable"}
    return pod


def _managed_fields(owner_uid: str, stamp: str) -> list[dict[str, Any]]:
    """The ReplicaSet controller's managedFields entry, as the API server records it."""
    return [
        {
            "manager": "kube-controller-manager",
            "operation": "Update",
            "apiVersion": "v1",
            "time": stamp,
            "fieldsType": "FieldsV1",
            "fieldsV1": {
                "f:metadata": {
                    "f:generateName": {},
                    "f:labels": {".": {}, "f:app": {}, "f:pod-template-hash": {}},
                    "f:ownerReferences": {
                        ".": {},
                        f'k:{{"uid":"{owner_uid}"}}': {},
                    },
                },
                "f:spec": {
                    "f:containers": {
                        'k:{"name":"app"}': {
                            ".": {},
                            "f:image": {},
                            "f:imagePullPolicy": {},
                            "f:name": {},
                            "f:ports": {".": {}, 'k:{"containerPort":8080}': {}},
                            "f:resources": {".": {}, "f:requests": {}},
                        }
                    },
                    "f:dnsPolicy": {},
                    "f:restartPolicy": {},
                    "f:schedulerName": {},
                    "f:terminationGracePeriodSeconds": {},
                },
            },
        }
    ]


def _token_volume() -> dict[str, Any]:
    """The service-account token volume the API server's admission adds."""
    return {
        "name": "kube-api-access-x7k2p",
        "projected": {
            "sources": [
                {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                {
                    "configMap": {
                        "name": "kube-root-ca.crt",
                        "items": [{"key": "ca.crt", "path": "ca.crt"}],
                    }
                },
                {
                    "downwardAPI": {
                        "items": [
                            {
                                "path": "namespace",
                                "fieldRef": {
                                    "apiVersion": "v1",
                                    "fieldPath": "metadata.namespace",
                                },
                            }
                        ]
                    }
                },
            ],
            "defaultMode": 420,
        },
    }


def _lifecycle(index: int, replica: str = REPLICA_ID) -> list[bytes]:
    """The watch events of one pod, encoded, in order."""
    pod = _pod(index, replica)
    events = [("ADDED", copy.deepcopy(pod))]
    # Half the pods are bound elsewhere than their booked node (node-00001).
    pod["spec"]["nodeName"] = f"node-{(index % NODES) + 1:05d}" if index % 2 else "node-00001"
    condition = {
        "type": "PodScheduled",
        "status": "True",
        "lastTransitionTime": "2026-11-23T10:00:01Z",
    }
    pod["status"]["conditions"] = [condition]
    events.append(("MODIFIED", copy.deepcopy(pod)))
    pod["status"].update(
        hostIP="10.0.3.17",
        podIP="10.244.3.51",
        startTime="2026-11-23T10:00:01Z",
        containerStatuses=[
            {
                "name": "web",
                "state": {"waiting": {"reason": "ContainerCreating"}},
                "ready": False,
                "restartCount": 0,
                "image": "nginx:1.27",
                "imageID": "",
                "started": False,
            }
        ],
    )
    events.append(("MODIFIED", copy.deepcopy(pod)))
    pod["status"]["phase"] = "Running"
    pod["status"]["containerStatuses"][0].update(
        state={"running": {"startedAt": "2026-11-23T10:00:03Z"}},
        ready=True,
        started=True,
        imageID="docker.io/library/nginx@sha256:" + "0" * 64,
        containerID="containerd://" + "1" * 64,
    )
    events.append(("MODIFIED", pod))
    return [json.dumps({"type": t, "object": o}, separators=(",", ":")).encode() for t, o in events]


def _replica_of(index: int, replicas: int) -> str:
    """The replica that steered pod ``index``: the admissions go round them
    ("": ``replicas`` 0, none did)."""
    if not replicas:
        return ""
    return REPLICA_ID if index % replicas == 0 else f"peer{index % replicas:06d}"


def _key(index: int, replicas: int) -> int:
    """Pod ``index``'s booking key in its replica: this one's own pods were
    booked in order, 1, 2, ...; the others' keys only need to be unique."""
    return index // replicas + 1 if index % replicas == 0 else index + 1


NAME, KEY, CREATED, UID = b"@NAME@", b"@KEY@", b"@CREATED@", b"@UID@"


def _templates(replicas: int) -> list[list[bytes]]:
    """A kept and a moved pod of each replica (of no replica: ``replicas``
    0), each state as JSON with the pod's name, uid, booking key and
    creation time left as placeholders."""
    templates = []
    for index in range(2 * max(replicas, 1)):
        states = []
        for encoded in _lifecycle(index, _replica_of(index, replicas)):
            state = json.loads(encoded)["object"]
            metadata = state["metadata"]
            metadata["name"], metadata["uid"] = NAME.decode(), UID.decode()
            if replicas:
                metadata["annotations"][BOOKING] = KEY.decode()
            metadata["creationTimestamp"] = CREATED.decode()
            metadata.pop("resourceVersion", None)
            states.append(json.dumps(state, separators=(",", ":")).encode())
        templates.append(states)
    return templates


def _serve(
    urls: "multiprocessing.Queue[str]",
    go: Any,
    done: Any,
    rate: int,
    seconds: int,
    replicas: int,
) -> None:
    """The fake API server, fed every pod's states at ``rate`` pods a second."""
    api = FakeKubeAPI()
    urls.put(api.url)
    go.wait()
    templates = _templates(replicas)
    total, started, sent = rate * seconds, time.monotonic(), 0
    while sent < total:
        due = min(total, int((time.monotonic() - started) * rate) + 1)
        created = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()).encode()
        for index in range(sent, due):
            name = b"web-7d9c4b6f5-%06d" % index
            uid = b"6f1c2a44-0000-4000-8000-%012d" % index
            key = b"%d" % _key(index, replicas) if replicas else b""
            for state in templates[index % len(templates)]:
                filled = state.replace(NAME, name).replace(KEY, key).replace(CREATED, created)
                filled = filled.replace(UID, uid)
                api.put(json.loads(filled), owned=True)
        sent = due
        time.sleep(BATCH)
    done.wait()
    api.stop()


def run(rate: int, seconds: int, workdir: str, replicas: int = 1) -> dict[str, float]:
    context = multiprocessing.get_context("spawn")
    urls: multiprocessing.Queue[str] = context.Queue()
    go, done = context.Event(), context.Event()
    server = context.Process(
        target=_serve, args=(urls, go, done, rate, seconds, replicas), daemon=True
    )
    server.start()
    try:
        url = urls.get(timeout=30)
        kubeconfig = os.path.join(workdir, "kubeconfig")
        with open(kubeconfig, "w") as handle:
            yaml.safe_dump(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [{"name": "b", "cluster": {"server": url}}],
                    "users": [{"name": "b", "user": {"token": FakeKubeAPI.TOKEN}}],
                    "contexts": [{"name": "b", "context": {"cluster": "b", "user": "b"}}],
                    "current-context": "b",
                },
                handle,
            )
        settings = settings_from_mapping(
            {"prometheus": {"url": "http://synthetic.invalid"}, "metricsServer": {"enabled": False}}
        )
        serving = serving_parts(settings, replica=REPLICA_ID)
        names = node_names(NODES)
        nodes = [node_from_json(obj) for obj in node_list(NODES)]
        measurer = Measurer(settings, lambda: nodes, SyntheticTraffic(names), None)  # type: ignore[arg-type]
        serving.scoreboard.record(measurer.measure())
        snapshot = serving.scoreboard.snapshot
        assert snapshot is not None
        inflight = serving.inflight
        now = time.time()
        total = rate * seconds
        # What this replica's admissions booked (none for pods no replica steered).
        own = len(range(0, total, replicas)) if replicas else 0
        for _ in range(own):
            with inflight.admission(snapshot) as admission:
                admission.book("node-00001", 2**20, now, admission.new_key())
        horizon = settings.steering.pod_startup + settings.prometheus.window
        api = api_client(kubeconfig)
        watch: BindingWatch | UnsteeredPods
        if replicas:
            watch = BindingWatch(api, inflight, REPLICA_ID, horizon)
        else:
            watch = UnsteeredPods(api, inflight)

        def settled() -> int:
            if isinstance(watch, UnsteeredPods):
                return watch.placed
            counts = watch.counts()
            return counts["moved"] + counts["kept"]

        cpu_before, wall_before = time.process_time(), time.monotonic()
        watch.start()
        go.set()
        deadline = wall_before + seconds + 60
        while settled() < total and time.monotonic() < deadline:
            time.sleep(0.01)
        wall, cpu = time.monotonic() - wall_before, time.process_time() - cpu_before
        watch.stop()
        counts = watch.counts() if isinstance(watch, BindingWatch) else {}
        if settled() < total:
            raise SystemExit(f"the watch settled {settled()} of {total} pods")
        return {
            "pods": total,
            "events": total * len(_lifecycle(0)),
            "event_bytes": sum(len(e) for e in _lifecycle(0)) / len(_lifecycle(0)),
            "wall": wall,
            "cpu": cpu,
            "moved": counts.get("moved", 0),
            "kept": counts.get("kept", 0),
            "seen": counts.get("seen", 0),
            "watch_delay": inflight.watch_delay,
        }
    finally:
        done.set()
        server.join(10)
        if server.is_alive():
            server.kill()


def main(argv: list[str] | None = None) -> int:
    import tempfile

    args = bench_parser(__doc__).parse_args(argv)
    # The watch's re-list when the fake server stops is not news here.
    logging.getLogger("kubectl_nettraffic.kube.reflector").setLevel(logging.ERROR)
    results = {}
    for replicas in (1, 2, 3, 0):
        with tempfile.TemporaryDirectory() as workdir:
            results[replicas] = run(RATE, SECONDS, workdir, replicas)
    one, unsteered = results[1], results.pop(0)
    events_per_pod = one["events"] / one["pods"]
    rows = [
        f"Steered pods: {RATE:,}/s for {SECONDS} s ({one['pods']:,.0f}; half of them bound "
        f"elsewhere than their first preference); {events_per_pod:.0f} watch events per pod, "
        f"{RATE * events_per_pod:,.0f}/s, {one['event_bytes'] / 1024:.1f} KiB each.",
        "",
        "| replicas sharing the admissions | booked here at admission | booked here from the watch "
        "| all bookings settled after | CPU of one replica's watch | per steered pod "
        "| watch delay it measured |",
        "|---|---|---|---|---|---|---|",
    ]
    for replicas, result in results.items():
        rows.append(
            f"| {replicas} | {result['pods'] - result['seen']:,.0f} | {result['seen']:,.0f} "
            f"| {result['wall']:.1f} s | {result['cpu'] / result['wall']:.0%} of one core "
            f"| {result['cpu'] / result['pods'] * 1e6:.0f} µs | {result['watch_delay']:.2f} s |"
        )
    rows += [
        "",
        f"Pods no replica steered (the same pods without our label and annotations, "
        f"{RATE:,}/s for {SECONDS} s), as the watch of unsteered pods reads them "
        "(kube/unsteered_pods.py): each counted in its workload's spread once bound.",
        "",
        "| pods | all counted after | CPU of its watch | per pod |",
        "|---|---|---|---|",
        f"| {unsteered['pods']:,.0f} | {unsteered['wall']:.1f} s "
        f"| {unsteered['cpu'] / unsteered['wall']:.0%} of one core "
        f"| {unsteered['cpu'] / unsteered['pods'] * 1e6:.0f} µs |",
    ]
    table = "\n".join(rows)
    print(table)
    if not args.no_write:
        write_section(
            "binding-watch",
            "Following bindings and other replicas' pods: the watch's cost at 1,000 admissions/s",
            "python -m bench.binding_watch",
            "One replica's BindingWatch (the real Reflector and in-flight state, with its "
            "replica id) reading the events of every steered pod from harness/fakeapi.py's "
            "API server in another process: "
            "per pod ADDED, bound, and two kubelet status updates, shaped as the API server "
            "sends a Deployment's pod. With several replicas the admissions are shared among "
            "them and each replica also books the others' pods from the watch. CPU is the "
            "watching process's over the run. This replica's own pods are booked before the "
            "run, so the watch delay it measures is capped (1 s): it shows the delay's code "
            "ran, not a control plane's delay.\n\n" + table,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
