"""``kubectl nettraffic``: top, explain, rebalance, doctor, certs, cleanup, tiers, version.

kubectl finds this as ``kubectl-nettraffic`` on PATH and passes every
argument after the plugin name. Errors are one line on stderr, ``error:
...``, exit code 1; the traceback only with ``-v``.
"""

import argparse
import logging
import os
import sys
import traceback
from collections.abc import Callable
from typing import NoReturn

from kubectl_nettraffic.cli import render
from kubectl_nettraffic.cli.commands import run_rebalance, run_top, run_top_pods, run_version
from kubectl_nettraffic.errors import NetTrafficError


class PluginParser(argparse.ArgumentParser):
    """Usage errors as every other error of the plugin: one line, exit code 1
    (argparse's own: the usage and exit code 2), and where to read more, as
    kubectl says it."""

    def error(self, message: str) -> NoReturn:
        self.exit(1, f"error: {message}\nSee '{self.prog} --help' for usage.\n")


def _add_cluster_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config", default=os.environ.get("NETTRAFFIC_CONFIG"), help="config file (YAML)"
    )
    parser.add_argument(
        "--kubeconfig", help="path to the kubeconfig file (default: KUBECONFIG, ~/.kube/config)"
    )
    parser.add_argument("--context", help="kubeconfig context to use")
    parser.add_argument(
        "-v", "--verbose", action="store_true", help="tracebacks and source details"
    )


def _add_webhook_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--webhook-namespace", default="nettraffic", help="namespace of the webhook Service"
    )
    parser.add_argument(
        "--webhook-service", default="nettraffic", help="name of the webhook Service"
    )
    parser.add_argument("--webhook-port", type=int, default=443, help="port of the webhook Service")


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be more than 0 seconds")
    return value


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be 1 or more")
    return value


TOP_VIEWS = ("nodes", "pods", "workloads")


def expand_shorthand(argv: list[str]) -> list[str]:
    """``top [NODE...]`` is short for ``top nodes [NODE...]``; a node named
    ``pods`` or ``workloads`` is shown with the long form."""
    if argv[:1] == ["top"] and (len(argv) == 1 or argv[1] not in (*TOP_VIEWS, "-h", "--help")):
        return ["top", "nodes", *argv[1:]]
    return argv


def _add_top(commands: "argparse._SubParsersAction[PluginParser]") -> None:
    """``kubectl nettraffic top [nodes] [NODE...]``, ``top pods`` and ``top workloads``."""
    top = commands.add_parser(
        "top",
        help="live traffic and scores: per node (the default), per pod or per workload",
        description="`top [NODE...]` is short for `top nodes [NODE...]`.",
    )
    views = top.add_subparsers(dest="top_command", required=True, metavar="VIEW")
    nodes = views.add_parser(
        "nodes", help="per-node traffic, CPU/memory and the score the webhook uses"
    )
    nodes.add_argument("nodes", nargs="*", metavar="NODE", help="only these nodes")
    nodes.add_argument(
        "--sort-by",
        choices=render.SORT_KEYS,
        default="score",
        help="score best first, traffic/rx/tx/cpu/memory busiest first, name A-Z",
    )
    _add_top_view_flags(nodes)
    nodes.set_defaults(run=run_top)
    for view in TOP_VIEWS[1:]:
        pods = views.add_parser(
            view, help=f"network traffic per {view[:-1]}, with the bandwidth learned for each"
        )
        pods.add_argument(
            "-n", "--namespace", default=None, help="this namespace (default: context's)"
        )
        pods.add_argument("-A", "--all-namespaces", action="store_true", help="every namespace")
        pods.add_argument(
            "--sort-by",
            choices=render.WORKLOAD_SORT_KEYS if view == "workloads" else render.POD_SORT_KEYS,
            default="traffic",
            help="traffic/rx/tx/learned"
            + ("/pods" if view == "workloads" else "")
            + " busiest first, name A-Z",
        )
        _add_top_view_flags(pods)
        pods.set_defaults(run=run_top_pods)


def _add_top_view_flags(view: argparse.ArgumentParser) -> None:
    """The flags every view of top has: selection, output, watching, source."""
    view.add_argument("-l", "--selector", default="", help="label selector, e.g. zone=a,!spot")
    view.add_argument("-o", "--output", choices=("table", "wide", "json", "yaml"), default="table")
    view.add_argument("--no-headers", action="store_true", help="no header line")
    view.add_argument(
        "--units", choices=("bytes", "bits"), default="bytes", help="bytes/s (SI) or bits/s"
    )
    view.add_argument("-w", "--watch", action="store_true", help="redraw every --interval seconds")
    view.add_argument(
        "--interval", type=_positive_seconds, default=5.0, help="seconds between frames (5)"
    )
    view.add_argument("--prometheus-url", help="Prometheus to compute from (--source prometheus)")
    view.add_argument(
        "--source",
        choices=("auto", "webhook", "prometheus"),
        default="auto",
        help="webhook: the running webhook's /scores; prometheus: compute here; auto: webhook, else here",
    )
    _add_cluster_flags(view)
    _add_webhook_flags(view)


def _add_explain(commands: "argparse._SubParsersAction[PluginParser]") -> None:
    """``kubectl nettraffic explain POD.``"""
    explain = commands.add_parser(
        "explain", help="why a pod got (or did not get) its preferred nodes"
    )
    explain.add_argument("pod", metavar="POD")
    explain.add_argument(
        "-n", "--namespace", default=None, help="the pod's namespace (default: context's)"
    )
    explain.add_argument(
        "--prometheus-url", help="Prometheus for the scores now, if the webhook is unreachable"
    )
    explain.add_argument("--source", choices=("auto", "webhook", "prometheus"), default="auto")
    _add_cluster_flags(explain)
    _add_webhook_flags(explain)
    explain.set_defaults(run=_lazy("kubectl_nettraffic.cli.explain", "run_explain"))


def _add_rebalance(commands: "argparse._SubParsersAction[PluginParser]") -> None:
    """``kubectl nettraffic rebalance: the plan, read-only.``"""
    rebalance = commands.add_parser(
        "rebalance",
        help="what the descheduler would move off hot nodes, and where (changes nothing)",
        description="The nodes over --threshold, their pods by traffic, which the "
        "descheduler's policy would evict first (--evictions-per-node per node per "
        "cycle) and the "
        "utilisation each node reaches once the webhook steers the replacements. "
        "It never evicts: the descheduler does (docs/operations.md, Rebalancing).",
    )
    rebalance.add_argument(
        "-n", "--namespace", default=None, help="show this namespace's pods (default: context's)"
    )
    rebalance.add_argument(
        "-A", "--all-namespaces", action="store_true", help="show pods of every namespace"
    )
    rebalance.add_argument(
        "--threshold",
        type=float,
        default=75.0,
        help="percent of link a node must be above to lose a pod: the policy's "
        "targetThresholds (75, as the chart renders it)",
    )
    rebalance.add_argument(
        "--low-threshold",
        type=float,
        default=50.0,
        help="percent of link at or below which a node can take pods: the policy's thresholds (50)",
    )
    rebalance.add_argument(
        "--min-pod-age",
        type=_positive_seconds,
        default=600.0,
        help="seconds a pod must have run to be evicted: DefaultEvictor's minPodAge (600)",
    )
    rebalance.add_argument(
        "--evictions-per-node",
        type=_positive_int,
        default=1,
        help="pods evicted from each hot node in one cycle, without measuring in between: "
        "the policy's evictionLimits.node (1)",
    )
    rebalance.add_argument("-o", "--output", choices=("table", "json", "yaml"), default="table")
    rebalance.add_argument("--no-headers", action="store_true", help="no header line")
    rebalance.add_argument("--prometheus-url", help="override prometheus.url")
    rebalance.add_argument("--source", choices=("auto", "webhook", "prometheus"), default="auto")
    _add_cluster_flags(rebalance)
    _add_webhook_flags(rebalance)
    rebalance.set_defaults(run=run_rebalance)


def _add_doctor(commands: "argparse._SubParsersAction[PluginParser]") -> None:
    """``kubectl nettraffic doctor.``"""
    doctor = commands.add_parser(
        "doctor", help="check every part the webhook depends on, with the fix"
    )
    doctor.add_argument("--prometheus-url", help="override prometheus.url")
    doctor.add_argument(
        "--webhook-name", default="nettraffic", help="MutatingWebhookConfiguration name"
    )
    doctor.add_argument(
        "--secret", default="nettraffic-tls", help="TLS Secret in the webhook namespace"
    )
    _add_cluster_flags(doctor)
    _add_webhook_flags(doctor)
    doctor.set_defaults(run=_lazy("kubectl_nettraffic.cli.doctor", "run_doctor"))


def _add_certs(commands: "argparse._SubParsersAction[PluginParser]") -> None:
    """``kubectl nettraffic certs create|patch|rotate.``"""
    certs = commands.add_parser("certs", help="issue, store, patch and rotate the webhook's TLS")
    actions = certs.add_subparsers(dest="action", required=True, metavar="ACTION")
    for name, text in (
        ("create", "CA + serving cert into a Secret (or --out-dir); keeps a valid one"),
        ("patch", "set caBundle on the MutatingWebhookConfiguration"),
        ("rotate", "new serving cert (and CA when due) with no rejected handshakes"),
    ):
        action = actions.add_parser(name, help=text)
        action.add_argument(
            "--namespace", "-n", default="nettraffic", help="namespace of the Service and Secret"
        )
        action.add_argument("--service", default="nettraffic", help="webhook Service name (SANs)")
        action.add_argument("--secret", default="nettraffic-tls", help="TLS Secret name")
        if name in ("patch", "rotate"):
            action.add_argument(
                "--webhook-name", default="nettraffic", help="MutatingWebhookConfiguration name"
            )
        if name == "patch":
            action.add_argument(
                "--failure-policy",
                choices=("Ignore", "Fail"),
                help="also set failurePolicy (left alone by default)",
            )
        if name in ("create", "rotate"):
            action.add_argument(
                "--key-type",
                choices=("ecdsa", "rsa"),
                default="ecdsa",
                help="ECDSA P-256 (default) or RSA 2048",
            )
            action.add_argument(
                "--ca-days", type=int, default=5 * 365, help="CA validity in days (1825)"
            )
            action.add_argument(
                "--days", type=int, default=365, help="serving cert validity in days (365)"
            )
            action.add_argument(
                "--renew-before", type=int, default=30, help="renew when fewer days remain (30)"
            )
            action.add_argument(
                "--extra-san", action="append", default=[], help="extra DNS name or IP SAN"
            )
        if name == "create":
            action.add_argument(
                "--out-dir", help="write ca.crt, tls.crt, tls.key here instead of a Secret"
            )
        if name == "rotate":
            action.add_argument("--force", action="store_true", help="rotate even if not due")
        _add_cluster_flags(action)
        action.set_defaults(run=_lazy("kubectl_nettraffic.cli.certs_command", f"run_{name}"))


def _add_cleanup(commands: "argparse._SubParsersAction[PluginParser]") -> None:
    """``kubectl nettraffic cleanup: the uninstall hook that deletes the MutatingWebhookConfiguration.``"""
    cleanup = commands.add_parser(
        "cleanup", help="delete the MutatingWebhookConfiguration (uninstall hook)"
    )
    cleanup.add_argument(
        "--webhook-name", default="nettraffic", help="MutatingWebhookConfiguration name"
    )
    _add_cluster_flags(cleanup)
    cleanup.set_defaults(run=_lazy("kubectl_nettraffic.cli.certs_command", "run_cleanup"))


def _add_tiers(commands: "argparse._SubParsersAction[PluginParser]") -> None:
    """``kubectl nettraffic tiers remove.``"""
    tiers = commands.add_parser("tiers", help="the traffic-tier node labels")
    tier_commands = tiers.add_subparsers(dest="tiers_command", required=True)
    remove = tier_commands.add_parser(
        "remove",
        help="remove the nettraffic.io/traffic-tier label from every node (uninstall hook)",
        description="Waits until the webhook's Lease has no live holder (the last "
        "writer stopped), removes the label from every node, and deletes the Lease.",
    )
    remove.add_argument(
        "--lease-namespace",
        default="",
        help="the Lease's namespace (default: as the webhook finds it: this pod's own "
        "namespace in the cluster, else default)",
    )
    remove.add_argument(
        "--lease-name", default="nettraffic-tier-labels", help="the Lease that elects the writer"
    )
    remove.add_argument(
        "--wait",
        type=float,
        default=60.0,
        help="seconds to wait for the last writer to stop (default 60)",
    )
    _add_cluster_flags(remove)
    remove.set_defaults(run=_lazy("kubectl_nettraffic.cli.tiers_command", "run_remove"))


def _add_version(commands: "argparse._SubParsersAction[PluginParser]") -> None:
    """``kubectl nettraffic version.``"""
    version = commands.add_parser("version", help="print the version")
    version.set_defaults(run=run_version, verbose=False)


def build_parser() -> argparse.ArgumentParser:
    parser = PluginParser(
        prog="kubectl nettraffic",
        description="Network-aware pod placement: live node traffic scores, explanations, TLS tooling.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    _add_top(commands)
    _add_explain(commands)
    _add_rebalance(commands)
    _add_doctor(commands)
    _add_certs(commands)
    _add_cleanup(commands)
    _add_tiers(commands)
    _add_version(commands)
    return parser


def _lazy(module: str, name: str) -> Callable[[argparse.Namespace], int]:
    """Import a command's module only when it runs: keeps `top` start-up fast."""

    def run(args: argparse.Namespace) -> int:
        import importlib

        command: Callable[[argparse.Namespace], int] = getattr(
            importlib.import_module(module), name
        )
        return command(args)

    return run


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(expand_shorthand(sys.argv[1:] if argv is None else argv))
    # The engine logs for the webhook's benefit; here errors reach the user as
    # one line instead, and the log only with -v.
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.CRITICAL, format="%(levelname)s %(message)s"
    )
    try:
        return int(args.run(args))
    except KeyboardInterrupt:
        return 0  # Ctrl-C ends --watch; that is success
    except NetTrafficError as error:
        if args.verbose:
            traceback.print_exc()
        print(f"error: {error}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        return 0  # `| head` closed the pipe
    except Exception as error:
        if args.verbose:
            traceback.print_exc()
        print(
            f"error: {error.__class__.__name__}: {error} (run with -v for details)", file=sys.stderr
        )
        return 1


if __name__ == "__main__":
    sys.exit(main())
