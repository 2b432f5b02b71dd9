"""Kubernetes label selectors (the ``-l`` syntax), parsed once, matched often.

Supports what ``kubectl get -l`` supports: ``a=b``, ``a==b``, ``a!=b``, ``a``,
``!a``, ``a in (x,y)``, ``a notin (x,y)``, comma-separated (AND).
"""

import re
from collections.abc import Mapping
from dataclasses import dataclass

from kubectl_nettraffic.errors import ConfigError

_KEY = r"[A-Za-z0-9]([-A-Za-z0-9_./]*[A-Za-z0-9])?"
_VALUE = r"([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?"
_REQUIREMENT = re.compile(
    rf"^\s*(?:(?P<not>!)\s*(?P<nkey>{_KEY})"
    rf"|(?P<skey>{_KEY})\s+(?P<setop>in|notin)\s*\((?P<values>[^)]*)\)"
    rf"|(?P<ekey>{_KEY})\s*(?P<op>==|=|!=)\s*(?P<value>{_VALUE})"
    rf"|(?P<key>{_KEY}))\s*$"
)


@dataclass(frozen=True)
class Requirement:
    key: str
    operator: str  # In, NotIn, Exists, DoesNotExist
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.operator == "Exists":
            return self.key in labels
        if self.operator == "DoesNotExist":
            return self.key not in labels
        if self.operator == "In":
            return self.key in labels and labels[self.key] in self.values
        # NotIn, like Kubernetes, also matches when the label is absent.
        return labels.get(self.key) not in self.values


@dataclass(frozen=True)
class LabelSelector:
    requirements: tuple[Requirement, ...] = ()
    text: str = ""

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(requirement.matches(labels) for requirement in self.requirements)


def _split_top_level(text: str) -> list[str]:
    """Split on commas that are not inside ``( )``."""
    parts, depth, current = [], 0, ""
    for char in text:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    parts.append(current)
    return parts


def parse_selector(text: str) -> LabelSelector:
    """Parse ``text``; raise ConfigError naming the part that is wrong."""
    if not text.strip():
        return LabelSelector()
    requirements = []
    for part in _split_top_level(text):
        match = _REQUIREMENT.match(part)
        if not match:
            raise ConfigError(
                f"label selector {text!r}: cannot read {part.strip()!r}; "
                "write it like role=edge,zone in (a,b),!spot"
            )
        if match.group("nkey"):
            requirements.append(Requirement(match.group("nkey"), "DoesNotExist"))
        elif match.group("skey"):
            values = frozenset(v.strip() for v in match.group("values").split(",") if v.strip())
            operator = "In" if match.group("setop") == "in" else "NotIn"
            requirements.append(Requirement(match.group("skey"), operator, values))
        elif match.group("ekey"):
            operator = "NotIn" if match.group("op") == "!=" else "In"
            value = match.group("value") or ""
            requirements.append(Requirement(match.group("ekey"), operator, frozenset({value})))
        else:
            requirements.append(Requirement(match.group("key"), "Exists"))
    return LabelSelector(tuple(requirements), text)
