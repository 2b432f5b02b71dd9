"""docs/design/architecture.md's map of the parts is the tree: every module
of kubectl_nettraffic/ and webhook/ is listed once, and nothing listed is
missing. A module added, moved or removed without the map fails here."""

import pathlib
import re
from collections import Counter

ROOT = pathlib.Path(__file__).resolve().parent.parent
MAPPED = ("kubectl_nettraffic", "webhook")


def listed_modules(text: str) -> list[str]:
    """Paths of the .py files in the map's code block, from its indentation."""
    block = text.split("## The parts", 1)[1].split("```", 2)[1]
    folders: list[tuple[int, str]] = []  # (indent, folder path) of the open folders
    listed = []
    for line in block.splitlines():
        match = re.match(r"( *)(\S+)", line)
        if not match:
            continue
        indent, name = len(match.group(1)), match.group(2)
        while folders and folders[-1][0] >= indent:
            folders.pop()
        parent = folders[-1][1] if folders else ""
        if name.endswith("/"):
            folders.append((indent, parent + name))
        elif name.endswith(".py") and parent.startswith(MAPPED):
            listed.append(parent + name)
    return listed


def tree_modules() -> set[str]:
    return {
        path.relative_to(ROOT).as_posix()
        for package in MAPPED
        for path in (ROOT / package).rglob("*.py")
        if path.name != "__init__.py"
    }


def test_every_module_is_listed_once() -> None:
    listed = listed_modules((ROOT / "docs/design/architecture.md").read_text())
    twice = [name for name, count in Counter(listed).items() if count > 1]
    assert not twice, f"listed more than once in architecture.md: {twice}"
    assert not tree_modules() - set(listed), "modules missing from architecture.md's map"
    assert not set(listed) - tree_modules(), "architecture.md lists modules that do not exist"


def test_the_parser_reads_nesting() -> None:
    # The check above is only as good as this reading of the map.
    text = "## The parts\n```\nwebhook/\n  a.py  x\n  sub/\n    b.py\n  c.py\nother/\n  d.py\n```\n"
    assert listed_modules(text) == ["webhook/a.py", "webhook/sub/b.py", "webhook/c.py"]


def test_the_scores_document_is_described_field_for_field():
    from kubectl_nettraffic.measuring.scoreview import NodeRow, ScoresDocument

    text = (ROOT / "docs/design/architecture.md").read_text()
    paragraph = text.split("**The scores document**", 1)[1].split("\n\n", 1)[0]
    described = set(re.findall(r"`([a-zA-Z]+)`", paragraph))
    fields = set(NodeRow.__annotations__) | set(ScoresDocument.__annotations__) - {"nodes"}
    assert described == fields


def test_no_document_or_module_cites_a_file_outside_the_repository() -> None:
    # The design contract the project was started from lives outside the
    # repository; what of it holds is in architecture.md's Contracts.
    outside = re.compile(r"DESIGN\.md|\.\./shared")
    citing = [
        str(path.relative_to(ROOT))
        for folder in ("docs", "kubectl_nettraffic", "webhook", "bench", "harness", "charts")
        for path in (ROOT / folder).rglob("*")
        if path.suffix in (".md", ".py", ".yaml", ".tpl")
        and outside.search(path.read_text(encoding="utf-8"))
    ]
    assert not citing, f"cite docs/design/architecture.md instead: {citing}"
