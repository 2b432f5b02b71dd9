"""An emulated cluster on real packets: network namespaces as nodes, veth
links shaped by tc, node_exporter in each node, a real Prometheus, the real
webhook, and pods that are real processes sending real traffic
(``python -m bench.testbed``; docs/design/testbed.md says how it is built)."""
