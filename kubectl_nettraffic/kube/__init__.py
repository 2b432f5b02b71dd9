"""The Kubernetes API and its vocabulary: the client, its watches (nodes,
namespaces, the steered pods whose bindings move bookings), Nodes, pods and
their parts, a pod's workload, node affinity as a predicate, leases. The
only package that imports the kubernetes client (the CLI too, for its
kubeconfig).

May import: the top-level foundation (errors, units, labels, config) only.
"""
