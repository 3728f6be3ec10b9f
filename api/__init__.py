"""The JigSaw control plane: REST API, SQL store, auth, and the scheduler loop."""
