"""The vocabulary every other room speaks: jobs and their lifecycle, plans, the cluster, what a
policy may decide, what an executor and a worker report, and the errors a user sees.

The lowest floor of the core: it imports only the standard library (and numpy/PyYAML where a
type needs them), never another room of ``jigsaw``.
"""
