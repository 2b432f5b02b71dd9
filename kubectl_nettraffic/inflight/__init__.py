"""Load booked but not measured yet: the ledger, the candidate heap, the
replicas steering beside this one, bursts of workloads not learned yet, and
the binding watch that moves bookings. InflightState owns all of it.

May import: measuring and everything below it.
"""
