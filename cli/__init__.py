"""jigsaw-cli: submit, watch and inspect JigSaw training jobs from a terminal."""
