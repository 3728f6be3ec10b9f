"""One scheduling cycle for simulation and service alike: the seams it runs against (Store,
Executor, Clock), the cycle itself (observe, reconcile, snapshot, decide, apply), the poison
search, the in-memory store, the facts a lease writes onto a job, and checkpoint retention.

Imports everything below it (the policies' protocol included); only the simulator sits above.
"""
