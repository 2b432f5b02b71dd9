import pytest

from kubectl_nettraffic.errors import ConfigError
from kubectl_nettraffic.labels import parse_selector
from kubectl_nettraffic.units import format_duration, format_rate, parse_duration, parse_quantity


@pytest.mark.parametrize(
    ("text", "seconds"), [("15s", 15), ("2m", 120), ("1h30m", 5400), ("500ms", 0.5), ("1d", 86400)]
)
def test_durations(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "15", "s", "1m 30s", "-1s", "1.s"])
def test_bad_durations(text):
    with pytest.raises(ValueError):
        parse_duration(text)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1Mi", 2**20),
        ("500k", 500_000),
        ("3800m", 3.8),
        ("123456789n", 0.123456789),
        ("16Gi", 16 * 2**30),
        ("1e3", 1000),
        (100, 100),
        ("1.5M", 1_500_000),
    ],
)
def test_quantities(text, value):
    assert parse_quantity(text) == pytest.approx(value)


@pytest.mark.parametrize(
    "text", ["NaN", "Infinity", "-Infinity", "1e400", "1.5.5", "", "Mi", "1ki", True, float("nan")]
)
def test_bad_quantities_are_refused_with_the_text_named(text):
    # The client's Decimal reads NaN and Infinity; a bandwidth must be finite.
    with pytest.raises(ValueError, match="quantity"):
        parse_quantity(text)


def test_formatting():
    assert (
        format_duration(42) == "42s"
        and format_duration(190) == "3m10s"
        and format_duration(120) == "2m"
    )
    assert format_rate(None) == "-"
    assert format_rate(12_345_678) == "12.3MB/s"
    assert format_rate(1_000_000, bits=True) == "8.0Mb/s"
    assert format_rate(512) == "512B/s"


def test_selector_forms():
    labels = {"filter.xy.com": "", "zone": "a", "tier": "edge"}
    assert parse_selector("filter.xy.com").matches(labels)
    assert parse_selector("zone in (a,b),tier=edge").matches(labels)
    assert not parse_selector("zone notin (a)").matches(labels)
    assert parse_selector("!spot,tier!=db").matches(labels)
    assert not parse_selector("spot").matches(labels)
    with pytest.raises(ConfigError, match="cannot read"):
        parse_selector("zone in a")


@pytest.mark.parametrize(
    "text",
    [
        "1Mi",
        "500k",
        "3800m",
        "123456789n",
        "16Gi",
        "1e3",
        "1.5M",
        "0.5Ki",
        "2E",
        "7u",
        ".5",
        "5.",
        "-3",
        "+2k",
        "1E-2",
    ],
)
def test_quantities_read_as_the_kubernetes_client_reads_them(text):
    # The client's parser, imported here only: units.py reads quantities
    # itself so that every CLI call does not pay the client's import.
    from kubernetes.utils import parse_quantity as client_quantity

    assert parse_quantity(text) == pytest.approx(float(client_quantity(text)))


def test_the_cli_starts_without_the_kubernetes_client():
    import subprocess
    import sys

    probe = (
        "import sys, contextlib, io\n"
        "from kubectl_nettraffic.cli.main import main\n"
        "for argv in (['version'], ['--help'], ['top', '--help']):\n"
        "    with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
        "        main(argv)\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'kubernetes'))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"
