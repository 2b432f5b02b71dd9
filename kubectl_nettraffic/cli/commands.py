"""The plugin's own commands: ``top`` (nodes, pods, workloads), ``rebalance``
and ``version``; the parser (main.py) wires them, importing each command's
module only when it runs (the kubernetes client takes a third of a second
to import, and ``version`` or ``--help`` should not pay for it)."""

import argparse
import os
import sys
import time
from typing import Any

from kubectl_nettraffic import __version__
from kubectl_nettraffic.cli import render
from kubectl_nettraffic.config import Settings
from kubectl_nettraffic.config_file import load_settings

CLEAR = "\x1b[H\x1b[2J"


def _settings(args: argparse.Namespace) -> Settings:
    overrides: dict[str, Any] = {"kubeconfig": getattr(args, "kubeconfig", None)}
    if getattr(args, "prometheus_url", None):
        overrides["prometheus.url"] = args.prometheus_url
    return load_settings(args.config, overrides)


def _use_colour(stream: Any) -> bool:
    return bool(stream.isatty()) and "NO_COLOR" not in os.environ


def run_top(args: argparse.Namespace) -> int:
    # Imported here: the kubernetes client takes a third of a second to import,
    # and `version` or `--help` should not pay for it.
    from kubectl_nettraffic.cli.top import WebhookLocation, fetch, node_filter

    settings = _settings(args)
    location = WebhookLocation(args.webhook_namespace, args.webhook_service, args.webhook_port)
    wanted = node_filter(settings, args.context, args.nodes, args.selector)
    terminal = sys.stdout.isatty()
    previous: dict[str, int] | None = None
    frames = 0
    while True:
        document, origin = fetch(args.source, settings, args.context, location, args.verbose)
        rows = [r for r in document["nodes"] if wanted is None or r["name"] in wanted]
        if wanted is not None:
            missing = sorted(wanted - {r["name"] for r in document["nodes"]})
            if missing and args.nodes:
                print(
                    f"error: node(s) {', '.join(missing)} not found in the scores", file=sys.stderr
                )
                if not rows:
                    return 1
        rows = render.sort_rows(rows, args.sort_by)
        if args.output == "json":
            text = render.as_json(document, rows)
        elif args.output == "yaml":
            text = render.as_yaml(document, rows)
        else:
            text = render.table(
                document,
                rows,
                now=time.time(),
                wide=args.output == "wide",
                headers=not args.no_headers,
                bits=args.units == "bits",
                colour=_use_colour(sys.stdout),
                bars=terminal,
                previous=previous if args.watch else None,
            )
        if args.watch and terminal:
            header = f"Every {args.interval:g}s · source: {origin} · {time.strftime('%H:%M:%S')}   (Ctrl-C to quit)\n\n"
            sys.stdout.write(CLEAR + header + text)
        else:
            if args.watch and frames:
                sys.stdout.write("\n")
            sys.stdout.write(text)
        sys.stdout.flush()
        if (
            args.source == "auto"
            and not args.watch
            and args.output in ("table", "wide")
            and args.verbose
        ):
            print(f"source: {origin}", file=sys.stderr)
        frames += 1
        if not args.watch:
            return 0
        previous = {r["name"]: r["score"] for r in document["nodes"]}
        time.sleep(args.interval)


def run_top_pods(args: argparse.Namespace) -> int:
    from kubectl_nettraffic.cli.top_pods import run_top_pods as run

    settings = _settings(args)
    return run(args, args.top_command, settings, _namespace(args, settings))


def _namespace(args: argparse.Namespace, settings: Settings) -> str | None:
    """-n, else the context's namespace, as kubectl; None with -A (every namespace)."""
    from kubectl_nettraffic.kube.client import context_namespace

    if args.all_namespaces:
        return None
    return str(args.namespace or context_namespace(settings.kubeconfig, args.context))


def run_rebalance(args: argparse.Namespace) -> int:
    from kubectl_nettraffic.cli.rebalance import run_rebalance as run

    settings = _settings(args)
    return run(args, settings, _namespace(args, settings))


def run_version(args: argparse.Namespace) -> int:
    print(f"kubectl-nettraffic {__version__}")
    return 0
