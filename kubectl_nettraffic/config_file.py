"""The config file and --flag overrides, read into validated Settings."""

from collections.abc import Mapping
from typing import Any

import yaml

from kubectl_nettraffic.config import Settings, settings_from_mapping
from kubectl_nettraffic.errors import ConfigError


def apply_override(raw: dict[str, Any], dotted_key: str, value: Any) -> None:
    """Set ``prometheus.url`` style keys in a raw config mapping (for CLI flags)."""
    parts = dotted_key.split(".")
    node = raw
    for part in parts[:-1]:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise ConfigError(f"config key {dotted_key}: {part} is not a section")
        node = child
    node[parts[-1]] = value


def read_config_file(path: str) -> dict[str, Any]:
    """The raw mapping in a YAML config file; empty file is an empty mapping."""
    try:
        with open(path, encoding="utf-8") as handle:
            raw = yaml.safe_load(handle)
    except FileNotFoundError:
        raise ConfigError(f"config file {path!r} does not exist; check --config") from None
    except yaml.YAMLError as error:
        raise ConfigError(f"config file {path!r} is not valid YAML: {error}") from None
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ConfigError(f"config file {path!r}: expected a map of keys at the top level")
    return raw


def load_settings(path: str | None = None, overrides: Mapping[str, Any] | None = None) -> Settings:
    """Read ``path`` (if given), apply dotted-key overrides, validate."""
    raw = read_config_file(path) if path else {}
    for key, value in (overrides or {}).items():
        if value is not None:
            apply_override(raw, key, value)
    return settings_from_mapping(raw)
