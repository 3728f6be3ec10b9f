"""``python -m cli`` runs the same entry point as the ``jigsaw-cli`` console script."""

from cli.main import main

main()
