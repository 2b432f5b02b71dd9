"""Real parts for tests, benchmarks and the demo: Prometheus, a fake
Kubernetes API server over HTTP, a live node_exporter stand-in, the webhook
process, and AdmissionReviews shaped as the API server sends them."""

import socket
import subprocess
from http.server import BaseHTTPRequestHandler
from typing import Any


class QuietHandler(BaseHTTPRequestHandler):
    """An HTTP/1.1 handler that logs nothing and sends small writes at once."""

    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def setup(self) -> None:
        super().setup()
        # Headers and body are separate writes; without this, delayed ACKs add
        # 40 ms to every response on a kept-alive connection.
        self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


def stop_process(process: "subprocess.Popen[Any]", grace: float = 10.0) -> None:
    """SIGTERM, then SIGKILL after ``grace`` seconds."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(grace)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
