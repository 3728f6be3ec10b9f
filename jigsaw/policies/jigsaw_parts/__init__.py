"""The parts only the ``jigsaw`` policy uses: placing waiters, the slack market and its offers,
and the elastic rule with its resize prices."""
