"""Learned per-workload bandwidth: the learner's Prometheus query, its pacing
and the VPA-style estimator.

May import: sources, scoring, kube and the foundation.
"""
