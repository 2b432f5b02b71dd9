"""The process metrics every Prometheus client exports (process_cpu_seconds_total,
process_resident_memory_bytes, ...), read from /proc at scrape time as
client_python's ProcessCollector reads them (process_collector.py): the
names and units dashboards and alerts already expect of any exporter."""

import os
import resource

from webhook.metrics import help_lines, number

_TICKS = os.sysconf("SC_CLK_TCK")
_PAGE = resource.getpagesize()


def _boot_time() -> float:
    with open("/proc/stat", encoding="ascii") as stat:
        for line in stat:
            if line.startswith("btime "):
                return float(line.split()[1])
    raise OSError("no btime in /proc/stat")


class ProcessMetrics:
    """This process's CPU, memory, start time and file descriptors. Where
    /proc is missing (not Linux) it exposes nothing."""

    def __init__(self, proc: str = "/proc/self") -> None:
        self._proc = proc
        self._boot: float | None
        try:
            self._boot = _boot_time()
        except OSError:
            self._boot = None

    def expose(self) -> list[str]:
        if self._boot is None:
            return []
        try:
            with open(os.path.join(self._proc, "stat"), encoding="ascii") as handle:
                # After the command's closing parenthesis (it may hold spaces):
                # field 3 (state) onwards, so utime (14) is at index 11.
                fields = handle.read().rpartition(")")[2].split()
            open_fds = len(os.listdir(os.path.join(self._proc, "fd")))
        except OSError:
            return []
        soft_limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        values = (
            (
                "process_cpu_seconds_total",
                "counter",
                "Total user and system CPU time spent in seconds.",
                (float(fields[11]) + float(fields[12])) / _TICKS,
            ),
            (
                "process_virtual_memory_bytes",
                "gauge",
                "Virtual memory size in bytes.",
                float(fields[20]),
            ),
            (
                "process_resident_memory_bytes",
                "gauge",
                "Resident memory size in bytes.",
                float(fields[21]) * _PAGE,
            ),
            (
                "process_start_time_seconds",
                "gauge",
                "Start time of the process since unix epoch in seconds.",
                float(fields[19]) / _TICKS + self._boot,
            ),
            ("process_open_fds", "gauge", "Number of open file descriptors.", float(open_fds)),
            (
                "process_max_fds",
                "gauge",
                "Maximum number of open file descriptors.",
                float(soft_limit),
            ),
        )
        lines: list[str] = []
        for name, kind, text, value in values:
            lines += help_lines(name, text, kind)
            lines.append(f"{name} {number(value)}")
        return lines
