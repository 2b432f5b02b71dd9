"""The measuring sources: Prometheus (node_exporter counters) and
metrics-server, each read once per refresh.

May import: scoring (the readings it fills), kube and the foundation.
"""
