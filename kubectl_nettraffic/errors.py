"""One error family for the whole project.

Every message names the bad value and says what to do next, so that the CLI
can print it as one line and the webhook can log it without a traceback.
"""


class NetTrafficError(Exception):
    """Base of every error this project raises on purpose."""


class ConfigError(NetTrafficError):
    """A config key, flag or file has a value we cannot use."""


class SourceError(NetTrafficError):
    """A metrics source (Prometheus, metrics-server) failed or answered nonsense;
    ``reason``: a short word for counting (timeout, unreachable, tls, http,
    malformed, ...)."""

    def __init__(self, message: str, reason: str = "error") -> None:
        super().__init__(message)
        self.reason = reason


class ClusterError(NetTrafficError):
    """The Kubernetes API could not be reached or refused a request."""


class CertError(NetTrafficError):
    """A certificate, key or Secret is missing, malformed or cannot be stored."""


class InputError(NetTrafficError):
    """A request body (AdmissionReview, ExtenderArgs) is malformed."""
