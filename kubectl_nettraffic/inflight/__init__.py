"""Load booked but not measured yet: the bookings store (bookings.py), the
candidate heaps that rank nodes by it (candidates.py), the replicas
steering beside this one (replica_share.py), and the one owner of all of it
and its lock (state.py).

Inside, each imports only those below it: state; candidates; bookings and
replica_share (not each other); handicaps and ramp_sums.
May import: measuring and everything below it.
"""
