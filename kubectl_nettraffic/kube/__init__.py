"""The Kubernetes API and its vocabulary: the client, Nodes, pods and their
parts, a pod's workload, node affinity as a predicate, leases.

May import: the top-level foundation (errors, units, labels, config) only.
"""
