"""The scheduler loop as the service runs it: leader election, executor, recorders."""
