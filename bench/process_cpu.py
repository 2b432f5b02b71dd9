"""The CPU a process and its descendants use, from /proc, and pinning
them to one CPU."""

import os


def _process_table() -> dict[int, tuple[int, float]]:
    """pid -> (parent pid, CPU seconds used so far: user + system)."""
    ticks = os.sysconf("SC_CLK_TCK")
    table = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except OSError:
            continue  # ended meanwhile
        table[int(entry)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / ticks)
    return table


def process_tree(root: int, table: dict[int, tuple[int, float]]) -> list[int]:
    """``root`` and its descendants (for the webhook: gunicorn's master, its
    worker, the refresher process)."""
    found, stack = [], [root]
    while stack:
        pid = stack.pop()
        found.append(pid)
        stack.extend(child for child, (parent, _) in table.items() if parent == pid)
    return found


def cpu_seconds(root: int) -> float:
    """CPU time used so far by process ``root`` and its descendants."""
    table = _process_table()
    return sum(table[pid][1] for pid in process_tree(root, table) if pid in table)


def pin_to_one_cpu(root: int) -> None:
    """Every thread of ``root`` and its descendants onto one CPU, as a pod
    given one exclusive CPU (kubelet's static CPU manager policy) runs.
    Threads started later inherit it from the thread that starts them."""
    cpu = min(os.sched_getaffinity(0))
    for pid in process_tree(root, _process_table()):
        for thread in os.listdir(f"/proc/{pid}/task"):
            os.sched_setaffinity(int(thread), {cpu})
