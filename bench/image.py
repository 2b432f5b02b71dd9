"""The image: how long a cold build takes, how big it is, what fills it, and
what a slimmer kubernetes client would save.

    python -m bench.image

Builds with ``.ci/image`` (podman; the stand-in base where the real one
cannot be pulled) without its layer cache, then measures:
- the image's size, and compressed as a registry stores it (gzip of
  ``podman save``);
- the largest packages in the image's venv;
- the kubernetes client package by part, against the parts of it the
  project imports (its modules, with every kubernetes import they make at
  import time and when they build an API client from a kubeconfig);
- a variant image whose build drops the parts nothing imports
  (``kubernetes/aio`` and ``kubernetes/client/api``), and whether both
  console scripts and an API client still work in it.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

from bench.report import bench_parser, write_section

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SITE = "/opt/nettraffic/lib/python3.11/site-packages"
UNUSED_PARTS = ("kubernetes/aio", "kubernetes/client/api")
# Every module of the project that talks to the API, then a client from a
# kubeconfig, as the webhook and the plugin build theirs.
IMPORTS_PROBE = """
import json, os, sys, tempfile
import webhook.app, webhook.server, kubectl_nettraffic.cli.main
import kubectl_nettraffic.kube.cluster, kubectl_nettraffic.tls.certs
import kubectl_nettraffic.kube.client as client
import kubectl_nettraffic.sources.metrics_server
path = os.path.join(tempfile.mkdtemp(), "config")
with open(path, "w") as handle:
    handle.write('''apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:6443"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
''')
client.api_client(path)
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] == "kubernetes")))
"""


def podman(*args: str, timeout: float = 600) -> str:
    result = subprocess.run(
        ["podman", *args], capture_output=True, text=True, timeout=timeout, check=False
    )
    if result.returncode != 0:
        raise RuntimeError(f"podman {' '.join(args)}: {result.stderr[-2000:]}")
    return result.stdout


def build(no_cache: bool) -> tuple[str, float, str]:
    """(image, build seconds, CONTAINERS_CONF) through .ci/image."""
    script = (
        ". .ci/setup >/dev/null; . .ci/image >/dev/null; "
        'echo "$NT_IMAGE $NT_IMAGE_BUILD_SECONDS $CONTAINERS_CONF"'
    )
    env = {**os.environ, "NT_IMAGE_NO_CACHE": "1" if no_cache else ""}
    started = time.monotonic()
    result = subprocess.run(
        ["bash", "-c", script], cwd=ROOT, capture_output=True, text=True, env=env, timeout=1800
    )
    if result.returncode != 0:
        raise RuntimeError(result.stdout[-2000:] + result.stderr[-2000:])
    image, _, conf = result.stdout.split()[-3:]
    return image, time.monotonic() - started, conf


def sizes(image: str) -> tuple[int, int]:
    """(bytes in local storage, bytes gzip-compressed as `podman save` writes it)."""
    size = int(podman("image", "inspect", "--format", "{{.Size}}", image).strip())
    compressed = subprocess.run(
        ["bash", "-c", f"set -o pipefail; podman save --quiet {image} | gzip -6 | wc -c"],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    return size, int(compressed.stdout)


def in_image(image: str, *command: str) -> str:
    return podman("run", "--rm", "--network=host", "--entrypoint", command[0], image, *command[1:])


def megabytes(kilobytes: int) -> str:
    return f"{kilobytes / 1024:.1f} MB"


def du(image: str, *paths: str) -> dict[str, int]:
    """Kilobytes per path, inside the image."""
    out = in_image(image, "du", "-sk", *paths)
    return {line.split("\t")[1]: int(line.split("\t")[0]) for line in out.splitlines()}


def slim_variant(image: str) -> str:
    """The same build with the unused parts of kubernetes dropped in the build stage."""
    with open(os.path.join(ROOT, "Dockerfile")) as handle:
        dockerfile = handle.read()
    prune = " ".join(f"{SITE}/{part}" for part in UNUSED_PARTS)
    marker = "\n# Final stage"
    assert marker in dockerfile
    variant = dockerfile.replace(marker, f"\nRUN rm -rf {prune}\n{marker}", 1)
    with tempfile.NamedTemporaryFile("w", suffix=".Dockerfile", delete=False) as handle:
        handle.write(variant)
    slim = image.rsplit(":", 1)[0] + ":slim-probe"
    try:
        mounts = ["-v", "/etc/ssl/certs/ca-certificates.crt:/etc/ssl/certs/ca-certificates.crt:ro"]
        pip_conf = os.path.join(ROOT, ".tools", "image", "pip.conf")
        if os.path.exists(pip_conf):
            mounts += ["-v", f"{pip_conf}:/etc/pip.conf:ro"]
        podman("build", "-q", "--pull=never", "--network=host", *mounts, "-f", handle.name,
               "-t", slim, ROOT)  # fmt: skip
    finally:
        os.unlink(handle.name)
    return slim


def main(argv: list[str] | None = None) -> int:
    args = bench_parser(__doc__).parse_args(argv)
    if shutil.which("podman") is None:
        print("podman is not installed: bash .ci/setup && . .ci/image installs it", file=sys.stderr)
    started = time.time()
    image, cold_seconds, conf = build(no_cache=True)
    os.environ["CONTAINERS_CONF"] = conf
    size, compressed = sizes(image)
    base = "localhost/python:3.11.11-slim-bookworm"
    try:
        base_size = int(podman("image", "inspect", "--format", "{{.Size}}", base).strip())
        base_note = "the mmdebstrap stand-in for python:3.11.11-slim-bookworm"
    except RuntimeError:
        base = "python:3.11.11-slim-bookworm"
        base_size = int(podman("image", "inspect", "--format", "{{.Size}}", base).strip())
        base_note = "python:3.11.11-slim-bookworm"
    packages = du(image, *in_image(image, "sh", "-c", f"ls -d {SITE}/*/").split())
    venv = du(image, "/opt/nettraffic")["/opt/nettraffic"]
    top = sorted(packages.items(), key=lambda item: -item[1])[:8]
    # du counts a directory once: the client's parts are asked for on their own.
    kube = du(image, *in_image(image, "sh", "-c", f"ls -d {SITE}/kubernetes/*/").split())
    kube.pop(f"{SITE}/kubernetes/client/", None)
    client_parts = in_image(image, "sh", "-c", f"ls -d {SITE}/kubernetes/client/*/").split()
    kube.update(du(image, *client_parts))
    imported = json.loads(in_image(image, "python", "-c", IMPORTS_PROBE))
    slim = slim_variant(image)
    slim_size, slim_compressed = sizes(slim)
    checks = {
        "nettraffic-webhook --help": in_image(slim, "nettraffic-webhook", "--help").startswith(
            "usage:"
        ),
        "kubectl-nettraffic --help": in_image(slim, "kubectl-nettraffic", "--help").startswith(
            "usage:"
        ),
        "the project's imports and an API client": bool(
            in_image(slim, "python", "-c", IMPORTS_PROBE)
        ),
    }
    podman("image", "rm", slim)
    elapsed = time.time() - started

    def kube_row(path: str) -> str:
        part = path.removeprefix(SITE + "/").rstrip("/")
        modules = [module.replace(".", "/") for module in imported]
        used = any(m == part or m.startswith(part + "/") for m in modules)
        return f"| `{part}` | {megabytes(kube[path])} | {'yes' if used else 'no'} |"

    kube_rows = [kube_row(p) for p in sorted(kube, key=lambda p: -kube[p]) if kube[p] >= 64]
    table = "\n".join(
        [
            "| | |",
            "|---|---|",
            f"| cold build (`NT_IMAGE_NO_CACHE=1 . .ci/image`, base image present) | {cold_seconds:.0f} s |",
            f"| image size | {size / 1e6:.0f} MB |",
            f"| compressed (gzip of `podman save`) | {compressed / 1e6:.0f} MB |",
            f"| of which the base image ({base_note}) | {base_size / 1e6:.0f} MB |",
            f"| the venv (/opt/nettraffic) | {megabytes(venv)} |",
        ]
    )
    top_table = "\n".join(
        ["| package | size |", "|---|---|"]
        + [f"| {path.removeprefix(SITE + '/').rstrip('/')} | {megabytes(kb)} |" for path, kb in top]
    )
    kube_table = "\n".join(
        ["| part of kubernetes | size | imported |", "|---|---|---|", *kube_rows]
    )
    slim_table = "\n".join(
        [
            "| image | size | compressed |",
            "|---|---|---|",
            f"| as built | {size / 1e6:.0f} MB | {compressed / 1e6:.0f} MB |",
            f"| without {', '.join(f'`{p}`' for p in UNUSED_PARTS)} | {slim_size / 1e6:.0f} MB | {slim_compressed / 1e6:.0f} MB |",
        ]
    )
    works = ", ".join(f"{name}: {'works' if ok else 'FAILS'}" for name, ok in checks.items())
    print(table, top_table, kube_table, slim_table, works, sep="\n\n")
    print(f"\n{elapsed:.0f}s")
    if not args.no_write:
        write_section(
            "image",
            "The image",
            "python -m bench.image",
            f"{table}\n\nThe venv's largest packages:\n\n{top_table}\n\n"
            "The kubernetes client package by part, and whether the project imports anything "
            "from it (its modules, and an API client built from a kubeconfig, as the webhook "
            f"and the plugin build theirs):\n\n{kube_table}\n\n"
            "A slimmer kubernetes dependency is possible: the project uses the client's "
            "ApiClient, its configuration and REST layer and the config loaders, never the "
            "typed API classes or the asyncio client. Dropped in the build stage, those parts "
            f"give:\n\n{slim_table}\n\nIn that variant: {works}. The image ships the package "
            f"whole: the parts are {(size - slim_size) / 1e6:.0f} MB on a node's disk but "
            f"{(compressed - slim_compressed) / 1e6:.0f} MB to pull (generated code compresses "
            "well), and dropping parts of a dependency is a step every upgrade would have to "
            "re-check.\n\n"
            f"Run time: {elapsed:.0f} s.",
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
