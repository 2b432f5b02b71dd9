"""The learner's reader (kubectl_nettraffic.learning.PodTrafficReader) for
the simulations: every pod's sample from the simulation, and each pod's
creation time, answered the way PodTrafficSource answers from Prometheus
(a slice by the pod name's last character; young rounds read the pods of
the workloads whose first pod was created within the age, as the
controllers' creation times give them, at most MOST_YOUNG pods, an equal
share each)."""

from collections.abc import Callable, Mapping

from kubectl_nettraffic.learning.pod_sample import PodSample
from kubectl_nettraffic.learning.pod_slices import WHOLE, PodSlice
from kubectl_nettraffic.learning.pod_traffic import PodTrafficReport
from kubectl_nettraffic.learning.young_workloads import equal_shares


class SimulatedPodTraffic:
    def __init__(
        self,
        rates: Callable[[], PodTrafficReport],
        created: Callable[[], Mapping[str, float]],
        young_workload_age: float,
    ) -> None:
        self.rates = rates
        self.created = created  # pod name -> when it was created, on the simulation's clock
        self.young_workload_age = young_workload_age

    def pod_count(self) -> int:
        return len(self.created())

    def samples(self, pods: PodSlice = WHOLE) -> PodTrafficReport:
        report = self.rates()
        kept = tuple(s for s in report.samples if pods.holds(s.pod))
        return PodTrafficReport(kept, report.missing, report.host_network_pods, report.evaluated_at)

    def young_samples(self) -> PodTrafficReport:
        report = self.rates()
        created = self.created()
        born: dict[object, float] = {}  # a workload is as old as its first pod
        for sample in report.samples:
            at = created.get(sample.pod)
            if sample.workload is not None and at is not None:
                born[sample.workload] = min(at, born.get(sample.workload, at))
        young = {w for w, at in born.items() if report.evaluated_at - at < self.young_workload_age}
        pods: dict[object, list[PodSample]] = {}
        for sample in report.samples:
            if sample.workload in young:
                pods.setdefault(sample.workload, []).append(sample)
        kept = tuple(sample for _, sample in equal_shares(pods, len(young)))
        return PodTrafficReport(kept, (), 0, report.evaluated_at)
