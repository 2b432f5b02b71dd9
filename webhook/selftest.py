"""``python -m webhook.selftest --url URL --ca-file CA``: the Helm test.

Checks /readyz over verified TLS, then posts a dry-run AdmissionReview for a
pod and checks the answer echoes the uid and allows it. Exit 0 on success.
"""

import argparse
import json
import ssl
import sys
import urllib.request
import uuid

from webhook.admission import API_VERSION, KIND


def _call(url: str, context: ssl.SSLContext, body: object = None) -> dict[str, object]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, context=context, timeout=10) as response:
        answer: dict[str, object] = json.loads(response.read())
        return answer


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m webhook.selftest")
    parser.add_argument("--url", required=True, help="https://SERVICE.NAMESPACE.svc:PORT")
    parser.add_argument("--ca-file", required=True, help="CA bundle to verify the webhook with")
    args = parser.parse_args(argv)
    context = ssl.create_default_context(cafile=args.ca_file)
    try:
        ready = _call(args.url + "/readyz", context)
        uid = str(uuid.uuid4())
        review = {
            "apiVersion": API_VERSION,
            "kind": KIND,
            "request": {
                "uid": uid,
                "kind": {"group": "", "version": "v1", "kind": "Pod"},
                "resource": {"group": "", "version": "v1", "resource": "pods"},
                "operation": "CREATE",
                "namespace": "default",
                "name": "",
                "dryRun": True,
                "object": {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {"generateName": "nettraffic-selftest-", "namespace": "default"},
                    "spec": {"containers": [{"name": "c", "image": "busybox"}]},
                },
            },
        }
        answer = _call(args.url + "/mutate", context, review)
    except (OSError, ValueError) as error:
        print(f"FAIL: {error}", file=sys.stderr)
        return 1
    response = answer.get("response") if isinstance(answer, dict) else None
    if (
        not isinstance(response, dict)
        or response.get("uid") != uid
        or response.get("allowed") is not True
    ):
        print(f"FAIL: unexpected answer {answer}", file=sys.stderr)
        return 1
    print(f"ok: ready={ready.get('ready')} patched={'patch' in response}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
