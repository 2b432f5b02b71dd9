"""kubectl-nettraffic: network-traffic-aware pod placement for Kubernetes."""

__version__ = "0.1.0"
