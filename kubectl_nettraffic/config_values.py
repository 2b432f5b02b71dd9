"""Parsers for single config values: each takes the dotted key and the raw
YAML value, and returns the typed value or raises a ConfigError that names
the key, the value and what is expected."""

import re
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlparse

from kubectl_nettraffic.errors import ConfigError
from kubectl_nettraffic.units import parse_duration, parse_quantity

# A parser takes the dotted key (for its message) and the raw value.
Parser = Callable[[str, Any], Any]


def string(key: str, value: Any) -> str:
    if value is None:
        return ""
    if not isinstance(value, str | int | float) or isinstance(value, bool):
        raise ConfigError(f"config key {key}: {value!r} is not a string")
    return str(value)


def boolean(key: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise ConfigError(f"config key {key}: {value!r} is not a boolean; use true or false")


def duration(key: str, value: Any) -> float:
    try:
        seconds = parse_duration(str(value))
    except ValueError as error:
        raise ConfigError(f"config key {key}: {error}") from None
    if seconds <= 0:
        raise ConfigError(f"config key {key}: {value!r} must be longer than zero")
    return seconds


def rule_interval(key: str, value: Any) -> float:
    """A recording rule's evaluation interval, at most Prometheus's default
    lookback (5m): an instant query finds no sample older than that."""
    seconds = duration(key, value)
    if seconds > 300:
        raise ConfigError(
            f"config key {key}: {value!r} is longer than 5m, Prometheus's lookback: "
            "an instant read would find no recorded sample; use 5m or less"
        )
    return seconds


def bandwidth(key: str, value: Any) -> float:
    try:
        amount = parse_quantity(value)
    except ValueError as error:
        raise ConfigError(f"config key {key}: {error} (bytes/s)") from None
    if amount < 0:
        raise ConfigError(f"config key {key}: {value!r} must not be negative")
    return amount


def weight(key: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ConfigError(f"config key {key}: {value!r} is not a number")
    try:
        number = float(value)
    except ValueError:
        raise ConfigError(f"config key {key}: {value!r} is not a number") from None
    if not number >= 0 or number == float("inf"):
        raise ConfigError(f"config key {key}: {value!r} must be a finite number >= 0")
    return number


def ratio(key: str, value: Any) -> float:
    number = weight(key, value)
    if number > 1:
        raise ConfigError(f"config key {key}: {value!r} is a ratio; use 0 (off) up to 1")
    return number


def busy_share(key: str, value: Any) -> float:
    number = weight(key, value)
    if not number < 1:
        raise ConfigError(
            f"config key {key}: {value!r} is a share of a link; use 0 up to below 1 (e.g. 0.5)"
        )
    return number


def share(key: str, value: Any) -> float:
    number = weight(key, value)
    if not 0 < number <= 1:
        raise ConfigError(
            f"config key {key}: {value!r} is a share of one core; use above 0, up to 1"
        )
    return number


def positive(key: str, value: Any) -> float:
    number = weight(key, value)
    if number <= 0:
        raise ConfigError(f"config key {key}: {value!r} must be above 0")
    return number


def metric_name(key: str, value: Any) -> str:
    text = string(key, value)
    if not re.fullmatch(r"[a-zA-Z_:][a-zA-Z0-9_:]*", text):
        raise ConfigError(
            f"config key {key}: {text!r} is not a Prometheus metric or label name "
            "(letters, digits, _ and :, not starting with a digit)"
        )
    return text


def label_matcher(key: str, value: Any) -> str:
    """``label=value`` (a Prometheus label and the value it must have), or empty."""
    text = string(key, value)
    if not text:
        return text
    label, equals, _ = text.partition("=")
    if not equals or not re.fullmatch(r"[a-zA-Z_][a-zA-Z0-9_]*", label):
        raise ConfigError(
            f"config key {key}: {text!r} is not label=value; write it like "
            "k8s_cluster_name=prod (Beyla, OBI) or source_cluster=prod (Istio)"
        )
    return text


def percentile(key: str, value: Any) -> float:
    number = weight(key, value)
    if not 0 < number < 1:
        raise ConfigError(f"config key {key}: {value!r} is a percentile; use 0.5 up to 0.99")
    return number


def hysteresis(key: str, value: Any) -> float:
    number = weight(key, value)
    if number >= 0.25:
        raise ConfigError(
            f"config key {key}: {value!r} is a share of the nodes below a tier's size (0.25); "
            "use 0 (none) up to 0.2"
        )
    return number


def label_value(key: str, value: Any) -> str:
    text = string(key, value)
    if text and not re.fullmatch(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", text):
        raise ConfigError(
            f"config key {key}: {text!r} is not a valid object name "
            "(lower-case letters, digits and '-', at most 63)"
        )
    return text


def integer(low: int, high: int) -> Parser:
    def parse(key: str, value: Any) -> int:
        try:
            number = int(str(value), 10) if not isinstance(value, bool) else None
        except ValueError:
            number = None
        if number is None or not low <= number <= high:
            raise ConfigError(f"config key {key}: {value!r} must be a whole number {low}..{high}")
        return number

    return parse


def choice(*choices: str) -> Parser:
    def parse(key: str, value: Any) -> str:
        if value not in choices:
            raise ConfigError(f"config key {key}: {value!r} is not one of {', '.join(choices)}")
        return str(value)

    return parse


def regex(key: str, value: Any) -> str:
    text = string(key, value)
    try:
        re.compile(text)
    except re.error as error:
        raise ConfigError(f"config key {key}: {text!r} is not a valid regex ({error})") from None
    if re.search(r"\(\?<?[=!]", text):
        raise ConfigError(
            f"config key {key}: {text!r} uses lookaround, which Prometheus (RE2) does not "
            "support; use plain alternatives like eth.*|ens.*"
        )
    return text


def url(key: str, value: Any) -> str:
    text = string(key, value).strip()
    if not text:
        return ""
    parsed = urlparse(text)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise ConfigError(
            f"config key {key}: {text!r} is not an http(s) URL; "
            "write it like http://prometheus.monitoring.svc:9090"
        )
    return text.rstrip("/")


def node_match(key: str, value: Any) -> str:
    text = string(key, value)
    if text in ("uname", "internal-ip"):
        return text
    if text.startswith("label:") and re.fullmatch(r"[a-zA-Z_][a-zA-Z0-9_]*", text[6:]):
        return text
    raise ConfigError(
        f"config key {key}: {text!r} is not uname, internal-ip or label:<prometheus label name>"
    )


def headers(key: str, value: Any) -> Mapping[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ConfigError(f"config key {key}: {value!r} is not a map of header name to value")
    return {str(name): string(f"{key}.{name}", item) for name, item in value.items()}


def scheduler_names(key: str, value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [part.strip() for part in value.split(",") if part.strip()]
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"config key {key}: {value!r} is not a non-empty list of scheduler names")
    return tuple(value)


def log_level(key: str, value: Any) -> str:
    return str(choice("debug", "info", "warning", "error")(key, str(value).lower()))
