"""The joint allocator behind the ``jigsaw`` policy: one configuration per job per round.

- :mod:`.config`: the options (levers on and off, the objective's knobs, the solver's limits);
- :mod:`.knowledge`: what a job can do at each size (its reports, else what it asked for);
- :mod:`.objective`: Pollux's objective generalised (power mean of speedups, restart discount,
  attained-service weight, work-left weight, churn);
- :mod:`.round_backlog`: the waiting jobs a round prices, and the price of those it sets aside;
- :mod:`.configurations`: each job's exclusive columns and the off column;
- :mod:`.must_run`: the jobs whose off column a round takes away (the critical path's waiting
  jobs, the starving), within the GPUs that pinned and protected jobs leave;
- :mod:`.cotenancy`: host and guest columns (slack on a running gang's GPUs);
- :mod:`.solve`: the exact sparse dynamic program, and HiGHS when co-tenancy is offered;
- :mod:`.place`: GPUs for the chosen configurations;
- :mod:`.longest_job`: the critical path ``protect_longest`` keeps running or starts.

docs/SCHEDULER.md, "jigsaw" explains the whole.
"""
