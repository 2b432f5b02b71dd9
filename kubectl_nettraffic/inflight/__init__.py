"""Load booked but not measured yet: the bookings store (bookings.py), the
candidate heaps that rank nodes by it and the one exact choice read off
them (candidates.py), the points each node gains or loses for one pod
(node_points.py), the replicas steering beside this one (replica_share.py),
and the one owner of all of it and its lock (state.py).

Inside, each imports only those below it: state; node_points; candidates;
bookings and replica_share (not each other); handicaps, ramp_sums and
workload_counts.
May import: measuring and everything below it.
"""
