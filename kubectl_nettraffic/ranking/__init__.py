"""How a pod's candidates are ranked: the candidate heaps that keep the
eligible nodes in order of live score with the bookings, and the one exact
choice read off them (candidates.py), the points each node gains or loses
for one pod (node_points.py), the replicas' share of the nodes
(replica_share.py), and the handicaps' points (handicaps.py).

inflight/ keeps the heaps current as it books; nothing here holds a
booking or a lock.

Inside, each imports only those below it: node_points; candidates;
replica_share; handicaps.
May import: measuring and everything below it.
"""
