"""Pure scoring: readings and Nodes in, ranked NodeScores, tiers and graded
preferences out. No I/O, no state.

May import: kube and the foundation.
"""
