"""Request and response bodies, named by role (Create, Public, List)."""
