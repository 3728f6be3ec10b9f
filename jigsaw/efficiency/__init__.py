"""Statistical efficiency, in one package: how much progress a step makes.

- :mod:`~jigsaw.model.block_noise`: per-block gradient-noise statistics (``BlockNoise``,
  McCandlish's two-batch estimator) and the checks reported statistics pass;
- :mod:`~jigsaw.efficiency.model`: the η model (η of an SPB plan from per-block noise,
  Pollux's batch-size efficiency, ``OnlineEta``);
- :mod:`~jigsaw.efficiency.table`: the measured η table (``jigsaw/data/efficiency.json``) and
  its lookup by plan shape;
- :mod:`~jigsaw.efficiency.online`: a job's online η, folding lease reports into the job;
- :mod:`~jigsaw.simulator.eta_curves`: η over training, from Pollux's measured curves (replay);
- :mod:`~jigsaw.efficiency.pipeline`: η of a PipeDream-2BW pipeline (its one-step weight
  delay) from the job's learning rate and momentum.
"""
