"""docs/plugin.md and the plugin's parser agree: every command and flag the
page shows exists, and every command the parser has is on the page."""

import argparse
import pathlib
import re

from kubectl_nettraffic.cli.main import build_parser, expand_shorthand

PAGE = pathlib.Path(__file__).resolve().parent.parent / "docs" / "plugin.md"
PREFIX = "kubectl nettraffic "


def synopses(text: str) -> list[str]:
    """Each ``kubectl nettraffic ...`` usage on the page: a code block's
    line and its indented continuations, or an inline code span."""
    found = []
    for block in re.findall(r"```\n(.*?)```", text, re.DOTALL):
        for usage in re.split(r"\n(?=kubectl nettraffic )", block.strip()):
            found.append(" ".join(usage.split()))
    without_blocks = re.sub(r"```\n.*?```", "", text, flags=re.DOTALL)
    for span in re.findall(r"`(kubectl nettraffic [^`]*)`", without_blocks):
        found.append(" ".join(span.split()))
    return [usage for usage in found if usage.startswith(PREFIX)]


def command_path(usage: str) -> list[str]:
    """The words naming the command, up to the first argument or flag, as the
    plugin reads them (``top`` alone is ``top nodes``)."""
    words = []
    for word in usage[len(PREFIX) :].split():
        if not re.fullmatch(r"[a-z]+", word):
            break
        words.append(word)
    return expand_shorthand(words)


def flags(usage: str) -> set[str]:
    return set(re.findall(r"(?<![\w-])(--?[a-zA-Z][\w-]*)", usage))


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def leaf_commands(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> list[tuple[str, ...]]:
    children = subcommands(parser)
    if not children:
        return [path]
    return [
        leaf for name, child in children.items() for leaf in leaf_commands(child, (*path, name))
    ]


def resolve(parser: argparse.ArgumentParser, path: list[str]) -> argparse.ArgumentParser:
    for word in path:
        children = subcommands(parser)
        if word not in children:
            break  # a positional value: the command is the parser so far
        parser = children[word]
    return parser


def test_every_documented_command_and_flag_exists():
    parser = build_parser()
    usages = synopses(PAGE.read_text())
    assert len(usages) >= 10
    for usage in usages:
        command = resolve(parser, command_path(usage))
        known = {option for action in command._actions for option in action.option_strings}
        missing = flags(usage) - known
        assert not missing, f"docs/plugin.md shows {sorted(missing)} in `{usage}`"


def test_every_command_is_documented():
    documented = {tuple(command_path(usage)) for usage in synopses(PAGE.read_text())}
    for leaf in leaf_commands(build_parser()):
        assert any(path[: len(leaf)] == leaf for path in documented), (
            f"`kubectl nettraffic {' '.join(leaf)}` is not on docs/plugin.md"
        )


def test_the_reading_of_the_page_finds_what_is_there():
    text = "```\nkubectl nettraffic top [NODE...] [-l SEL]\n    [--watch]\nkubectl nettraffic certs patch -n NS\n```\nand `kubectl nettraffic doctor\n[--secret S]` here"
    assert synopses(text) == [
        "kubectl nettraffic top [NODE...] [-l SEL] [--watch]",
        "kubectl nettraffic certs patch -n NS",
        "kubectl nettraffic doctor [--secret S]",
    ]
    assert command_path(synopses(text)[0]) == ["top", "nodes"]
    assert flags(synopses(text)[0]) == {"-l", "--watch"}
