"""Load booked but not measured yet: the bookings store, one row per pod
in flight with its one expiry rule (bookings.py), the pods of each
workload in flight per node and zone read off it (workload_counts.py), the
ramp's running sums (ramp_sums.py), and the one owner of the store and the
candidate heaps (ranking/) behind one lock (state.py).

Inside, each imports only those below it: state; bookings; ramp_sums and
workload_counts.
May import: ranking and everything below it.
"""
