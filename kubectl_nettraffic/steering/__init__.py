"""One admission: the pod's expected bandwidth, the choice, the patch and its
check.

May import: inflight and everything below it.
"""
