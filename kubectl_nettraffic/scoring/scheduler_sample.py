"""Whether kube-scheduler scores every node or only a sample of them.

kube-scheduler stops filtering once it has found numFeasibleNodesToFind
feasible nodes (pkg/scheduler/schedule_one.go) and scores only those:
every node below 100 (minFeasibleNodesToFind), else the profile's
``percentageOfNodesToScore`` of them, never fewer than 100; at 0 (its
default) 50% less a point per 125 nodes, at least 5% (500 nodes: 230 of
them). In a sample a pod's first preference is missing about as often as
the sample leaves nodes out, and its other preferred nodes are what is
left to it (scoring/placement.py).
"""

MIN_FEASIBLE_NODES = 100  # minFeasibleNodesToFind
MIN_FEASIBLE_PERCENTAGE = 5  # minFeasibleNodesPercentageToFind


def num_feasible_nodes_to_find(nodes: int, percentage_of_nodes_to_score: int = 0) -> int:
    """How many feasible nodes kube-scheduler, set to
    ``percentage_of_nodes_to_score`` (0: its adaptive default), looks for
    among ``nodes`` before it stops filtering, and so scores at most."""
    if nodes < MIN_FEASIBLE_NODES:
        return nodes
    share = percentage_of_nodes_to_score or max(50 - nodes // 125, MIN_FEASIBLE_PERCENTAGE)
    return max(nodes * share // 100, MIN_FEASIBLE_NODES)


def scores_a_sample(nodes: int, percentage_of_nodes_to_score: int = 0) -> bool:
    """Whether kube-scheduler scores fewer than all of ``nodes`` nodes."""
    return num_feasible_nodes_to_find(nodes, percentage_of_nodes_to_score) < nodes
