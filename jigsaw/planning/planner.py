"""The plan's one owner: every answer about what a job runs comes from one :class:`Planner`.

A planner is built once from the hardware (a GPU type), the per-worker memory limit
(``JIGSAW_WORKER_MEMORY_GIB``) and the model catalog, and handed to whoever needs a plan:
every policy (:func:`jigsaw.policies.builder.build_policy`), the API's submission checks and
``jobs:validate`` (one instance on the app's state), the simulator (one for the trace's GPU
type). It answers four questions, and nothing else in the code answers them:

- **K**: the model's block count, as a worker reported it for the job, else as the catalog
  knows it (:meth:`Planner.num_blocks`); ``None`` for an entrypoint before its first lease.
- **The plan type**: data, pipeline or hybrid (:meth:`Planner.plan_type`), chosen by the
  oracle's predictions of every alternative under the memory limit, ranked by goodput at the
  job's learning rate
  (:func:`jigsaw.oracle.plan_choice.choose_plan`, :meth:`Planner.plan_choice`).
- **The plan a job starts with** (:meth:`Planner.start_plan`): the plan it ran before, else its
  pipeline or hybrid plan, else its ``spb`` request resolved against K; full backprop over the
  model taken as one block while K is unknown (the worker resolves it against the model it
  built, docs/ARCHITECTURE.md "The plan's one owner").
- **The candidate plans** a plan-choosing policy prices (:meth:`Planner.candidates`).

Submissions are checked here too (:meth:`Planner.check`): a spec the planner accepts is one
the engines can run, because the checks read the same profile and make the same choice the
engines are then handed.
"""

from __future__ import annotations

from dataclasses import replace

from jigsaw.efficiency.online import candidate_plans
from jigsaw.model.domain import Job, JobSpec
from jigsaw.model.errors import InvalidPlanError, InvalidSpecError
from jigsaw.model.hardware import DEFAULT_GPU_TYPE, PRESET_NAMES, HardwareSpec, preset
from jigsaw.model.parallelism import HybridPlan, PipelinePlan, PlanType
from jigsaw.model.plan import Plan, SPBPlan, full_backprop, plan_type_of
from jigsaw.oracle.parallel_profile import parallel_profile_of
from jigsaw.oracle.plan_choice import AUTO_MARGIN, PlanChoice, choose_plan
from jigsaw.planning.catalog import ModelCatalog, default_catalog
from jigsaw.planning.optimizer_plans import data_only_choice

Candidate = tuple[str, Plan]
"""A plan a policy may give a job, with its label (``none``, ``staircase``, ``uniform:2``,
``pipeline``, ...)."""


class Planner:
    """What plan a job runs, on one kind of GPU under one per-worker memory limit.

    ``memory_limit_bytes`` is the per-worker limit on the model's own memory (parameters,
    gradients, optimizer state, activations: the quantity the workers enforce); ``None``
    means the GPU type's memory less its workspace. Answers are cached per spec shape; the
    planner changes nothing else and holds no global state.
    """

    def __init__(
        self,
        hardware: HardwareSpec | None = None,
        *,
        memory_limit_bytes: int | None = None,
        catalog: ModelCatalog | None = None,
        margin: float = AUTO_MARGIN,
    ) -> None:
        self.hardware = hardware if hardware is not None else preset(DEFAULT_GPU_TYPE)
        self.catalog = catalog if catalog is not None else default_catalog()
        self.memory_limit_bytes = (
            memory_limit_bytes
            if memory_limit_bytes is not None
            else self.hardware.memory_bytes - self.hardware.workspace_bytes
        )
        self.margin = margin
        self._choices: dict[
            tuple[str, int, int, str, str, float], PlanChoice | InvalidSpecError | None
        ] = {}

    @classmethod
    def for_gpu_type(
        cls,
        gpu_type: str,
        *,
        memory_limit_bytes: int | None = None,
        catalog: ModelCatalog | None = None,
    ) -> Planner:
        """A planner for a named GPU type; a type the oracle has no preset for is planned as
        :data:`~jigsaw.model.hardware.DEFAULT_GPU_TYPE` (:attr:`priced_as` says so)."""
        name = gpu_type if gpu_type in PRESET_NAMES else DEFAULT_GPU_TYPE
        return cls(preset(name), memory_limit_bytes=memory_limit_bytes, catalog=catalog)

    @property
    def priced_as(self) -> str:
        return self.hardware.name

    # -- K ---------------------------------------------------------------------------------
    def model_blocks(self, model: str) -> int | None:
        """K as the catalog knows it; ``None`` for an entrypoint (or a name it cannot build)."""
        return self.catalog.num_blocks(model)

    def num_blocks(self, job: Job) -> int | None:
        """K as a worker reported it for this job, else as the catalog knows it."""
        return (
            job.model_blocks if job.model_blocks is not None else self.model_blocks(job.spec.model)
        )

    # -- the plan type ---------------------------------------------------------------------
    def plan_choice(self, spec: JobSpec) -> PlanChoice | None:
        """The plan-type choice for ``spec`` with every alternative predicted; ``None`` for a
        model without a profile (data parallel, nothing to predict). Raises
        :class:`InvalidSpecError` naming what to fix when the requested type cannot run the
        model or nothing it allows fits the memory limit. A spec whose ``spb`` names an SPB
        plan is data parallel: it is offered data parallelism only."""
        parallelism = spec.parallelism
        if spec.spb not in ("auto", "none") and parallelism == "auto":
            parallelism = "data"
        key = (
            spec.model,
            spec.workers,
            spec.batch_size,
            parallelism,
            spec.optimizer,
            spec.learning_rate,
        )
        if key not in self._choices:
            self._choices[key] = self._choose(spec, parallelism)
        cached = self._choices[key]
        if isinstance(cached, InvalidSpecError):
            raise cached
        return cached

    def typed_plan(self, spec: JobSpec) -> PipelinePlan | HybridPlan | None:
        """The pipeline or hybrid plan ``spec`` runs, or ``None`` for data parallelism (its
        SPB depths are the policy's choice). Never raises: a spec nothing fits was refused at
        submit; in a simulation it runs data parallel."""
        if spec.parallelism == "data":
            return None
        try:
            chosen = self.plan_choice(spec)
        except InvalidSpecError:
            return None
        return chosen.chosen.plan if chosen is not None else None

    def plan_type(self, spec: JobSpec) -> PlanType:
        typed = self.typed_plan(spec)
        return plan_type_of(typed) if typed is not None else "data"

    # -- the plan a job starts with ----------------------------------------------------------
    def start_plan(self, job: Job) -> Plan:
        """The plan to start ``job`` with: the one it ran before (a resumed job keeps it),
        else its pipeline or hybrid plan, else its request resolved against K (``auto``: full
        backprop; SPB-aware policies choose among :meth:`candidates` instead). Before K is
        known: full backprop over the model taken as one block, which means the same at
        every K."""
        if job.plan is not None:
            return job.plan
        return self._resolve(job.spec, self.num_blocks(job))

    def spec_plan(self, spec: JobSpec) -> Plan:
        """:meth:`start_plan` for a spec not submitted yet (no reported K)."""
        return self._resolve(spec, self.model_blocks(spec.model))

    def resized_plan(self, job: Job, workers: int) -> SPBPlan:
        """An elastic job's plan on ``workers``: full backprop (elastic jobs are data
        parallel), over the K it ran with, else the planner's."""
        if isinstance(job.plan, SPBPlan):
            return full_backprop(workers, job.plan.num_blocks)
        return full_backprop(workers, self.num_blocks(job) or 1)

    # -- the candidates a plan-choosing policy prices ------------------------------------------
    def candidates(self, spec: JobSpec, *, spb: bool = True) -> tuple[Candidate, ...]:
        """A pipeline or hybrid job's plan alone; a fixed ``spb`` request resolved; under
        ``auto``, full backprop, the staircase and ``uniform:k`` for k in 1..K-1 (full
        backprop only when ``spb`` is off). A model the catalog has no K for: full backprop
        over one block."""
        blocks = self.model_blocks(spec.model)
        if blocks is None:
            return (("none", full_backprop(spec.workers, 1)),)
        typed = self.typed_plan(spec)
        if typed is not None:
            return ((typed.kind, typed),)
        if not spec.plan_request.is_auto:
            return ((spec.spb, spec.plan_request.resolve(spec.workers, blocks)),)
        if spb:
            return tuple(candidate_plans(spec.workers, blocks))
        return (("none", full_backprop(spec.workers, blocks)),)

    # -- what a submission must mean -----------------------------------------------------------
    def check(self, spec: JobSpec) -> None:
        """Every plan rule the engines enforce, for a spec about to be accepted; raises
        :class:`InvalidSpecError` naming the field to fix: ``spb`` resolves against K; a plan
        type the engines can build (a hybrid's sharded layers wide enough for the gang) fits
        the per-worker memory limit; the largest global batch fits the training split. An
        entrypoint's K and plan are checked at its first lease. The plan-type choice stays
        cached here, so the policy that starts the job (asking this same planner) gets the
        plan that was checked."""
        blocks = self.model_blocks(spec.model)
        if blocks is None:
            if spec.parallelism in ("pipeline", "hybrid"):
                raise InvalidSpecError(
                    f"parallelism {spec.parallelism!r} needs a zoo model with a profile to plan "
                    f"stages from; {spec.model[:80]!r} is an entrypoint: use parallelism data",
                    field="parallelism",
                )
            return
        try:
            spec.plan_request.check_blocks(blocks)
            spec.plan_request.resolve(spec.workers, blocks)
        except InvalidPlanError as error:
            raise InvalidSpecError(
                f"spb {spec.spb!r} does not fit model {spec.model!r} ({blocks} blocks): {error}",
                field="spb",
            ) from None
        self.plan_choice(spec)
        self._check_batch_fits_the_data(spec)

    # -- internals ----------------------------------------------------------------------------
    def _check_batch_fits_the_data(self, spec: JobSpec) -> None:
        """Every engine samples one iteration's global batch from the training split without
        repeats (worker/spb/sampler.py): the largest global batch the job may run with must
        fit the split the profile records."""
        entry = self.catalog.find(spec.model)
        samples = entry.profile.train_samples if entry and entry.profile else None
        largest = spec.batch_range[1]
        if samples is None or largest <= samples:
            return
        if spec.batch_policy == "adaptive":
            raise InvalidSpecError(
                f"max_global_batch {largest} exceeds the {samples} training samples of model "
                f"{spec.model!r}: ask for at most {samples}",
                field="max_global_batch",
            )
        fix = (
            f"use batch_size {samples // spec.workers} or less, or fewer workers"
            if samples >= spec.workers
            else f"use at most {samples} workers"
        )
        raise InvalidSpecError(
            f"global batch {largest} ({spec.workers} workers x {spec.batch_size}) exceeds the "
            f"{samples} training samples of model {spec.model!r}: {fix}",
            field="batch_size" if samples >= spec.workers else "workers",
        )

    def _resolve(self, spec: JobSpec, blocks: int | None) -> Plan:
        typed = self.typed_plan(spec)
        if typed is not None:
            return typed
        if blocks is None:
            return full_backprop(spec.workers, 1)
        return spec.plan_request.resolve(spec.workers, blocks)

    def _choose(self, spec: JobSpec, parallelism: str) -> PlanChoice | InvalidSpecError | None:
        entry = self.catalog.find(spec.model)
        if entry is None or entry.profile is None:
            return None
        profile = entry.profile
        if spec.optimizer != "sgd":
            return data_only_choice(spec, profile, self.hardware, self.memory_limit_bytes)
        try:
            choice = choose_plan(
                profile,
                parallel_profile_of(profile),
                self.hardware,
                spec.workers,
                spec.batch_size,
                self.memory_limit_bytes,
                parallelism,
                self.margin,
                lr=spec.learning_rate,  # a pipeline's η (2BW's delay) depends on it
            )
        except InvalidSpecError as error:
            if parallelism != spec.parallelism:
                error.args = (
                    f"{error.args[0]} (spb {spec.spb!r} is an SPB plan, which is "
                    "data parallel: set spb to auto or none to allow other types)",
                )
            return error
        if parallelism != spec.parallelism:
            reason = f"spb {spec.spb!r} is an SPB plan, which is data parallel"
            choice = replace(choice, requested=spec.parallelism, reason=reason)
        return choice
