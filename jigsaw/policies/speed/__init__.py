"""What makes a round cheap at cluster scale: a round's memory of what it kept, LAS ranking
that is updated instead of recomputed, and record diffs; each has a reference mode that the
differential tests hold equal."""
