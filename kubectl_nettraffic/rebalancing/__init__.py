"""The rebalance plan: which hot nodes the descheduler would relieve, and of
which pods. Read-only; evicting is the descheduler's job.

May import: scoring, kube and the foundation.
"""
