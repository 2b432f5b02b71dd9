"""A live node_exporter stand-in on 127.0.0.1: counters that grow in real
time at rates the test sets (and may change). One endpoint serves every
simulated node, each series labelled with its own ``instance``; Prometheus
scrapes it with ``honor_labels: true``.
"""

import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from harness.prometheus import Exporter


def serve_metrics(render: Callable[[], bytes]) -> ThreadingHTTPServer:
    """A /metrics endpoint on 127.0.0.1 answering ``render()`` to every GET."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            body = render()
            try:
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the scraper went (Prometheus stopped at the end of a run)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


class LiveExporter:
    def __init__(self, exporters: list[Exporter]) -> None:
        self.lock = threading.Lock()
        self.started = time.time()
        # instance -> device -> [rx_rate, tx_rate, rx_total, tx_total, last_update]
        self.state: dict[str, dict[str, list[float]]] = {}
        self.exporters = {e.instance: e for e in exporters}
        for exporter in exporters:
            self.state[exporter.instance] = {
                d.name: [d.rx, d.tx, 1e9, 2e9, self.started] for d in exporter.devices
            }
        self.server = serve_metrics(lambda: self.render().encode())
        self.target = f"127.0.0.1:{self.server.server_address[1]}"

    def set_rate(self, instance: str, device: str, rx: float, tx: float) -> None:
        with self.lock:
            self._advance(time.time())
            entry = self.state[instance][device]
            entry[0], entry[1] = rx, tx

    def _advance(self, now: float) -> None:
        for devices in self.state.values():
            for entry in devices.values():
                elapsed = now - entry[4]
                entry[2] += entry[0] * elapsed
                entry[3] += entry[1] * elapsed
                entry[4] = now

    def render(self) -> str:
        with self.lock:
            self._advance(time.time())
            lines = []
            for family, index in (("receive", 2), ("transmit", 3)):
                lines.append(f"# TYPE node_network_{family}_bytes_total counter")
                for instance, devices in self.state.items():
                    job = self.exporters[instance].job
                    for device, entry in devices.items():
                        lines.append(
                            f'node_network_{family}_bytes_total{{instance="{instance}",job="{job}",'
                            f'device="{device}"}} {entry[index]:.1f}'
                        )
            lines.append("# TYPE node_network_speed_bytes gauge")
            for instance, exporter in self.exporters.items():
                for device in exporter.devices:
                    if device.speed is not None:
                        lines.append(
                            f'node_network_speed_bytes{{instance="{instance}",job="{exporter.job}",'
                            f'device="{device.name}"}} {device.speed:.0f}'
                        )
            lines.append("# TYPE node_uname_info gauge")
            for instance, exporter in self.exporters.items():
                if exporter.nodename:
                    lines.append(
                        f'node_uname_info{{instance="{instance}",job="{exporter.job}",'
                        f'nodename="{exporter.nodename}"}} 1'
                    )
            return "\n".join(lines) + "\n"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
