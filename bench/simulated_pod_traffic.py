"""The learner's reader (kubectl_nettraffic.learning.PodTrafficReader) for
the simulations: every pod's sample from the simulation, and each pod's
creation time, answered the way PodTrafficSource answers from Prometheus
(a slice by the pod name's last character, the young pods by age)."""

from collections.abc import Callable, Mapping

from kubectl_nettraffic.pod_slices import WHOLE, PodSlice
from kubectl_nettraffic.sources.pod_traffic import MOST_YOUNG_PODS, PodTrafficReport


class SimulatedPodTraffic:
    def __init__(
        self,
        rates: Callable[[], PodTrafficReport],
        created: Callable[[], Mapping[str, float]],
        young_pod_age: float,
    ) -> None:
        self.rates = rates
        self.created = created  # pod name -> when it was created, on the simulation's clock
        self.young_pod_age = young_pod_age

    def pod_count(self) -> int:
        return len(self.created())

    def samples(self, pods: PodSlice = WHOLE) -> PodTrafficReport:
        report = self.rates()
        kept = tuple(s for s in report.samples if pods.holds(s.pod))
        return PodTrafficReport(kept, report.missing, report.host_network_pods, report.evaluated_at)

    def young_samples(self) -> PodTrafficReport:
        report = self.rates()
        created = self.created()
        young = sorted(
            (at, pod)
            for pod, at in created.items()
            if report.evaluated_at - at < self.young_pod_age
        )
        names = {pod for _, pod in young[-MOST_YOUNG_PODS:]}
        kept = tuple(s for s in report.samples if s.pod in names)
        return PodTrafficReport(kept, (), 0, report.evaluated_at)
