"""Entry points: ``serve`` (API + embedded scheduler) and ``run_scheduler`` (scheduler only).

Start-up is the same for both: wait for the database, ``alembic upgrade head`` (never
``create_all``), make sure an admin token exists, then run.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
from types import FrameType

from sqlalchemy import Engine

from api.app import build_state, create_app
from api.bootstrap import ensure_admin_token
from api.db import make_engine, wait_for_database
from api.metrics import Metrics
from api.migrate import upgrade_to_head
from api.oracle_view import OracleView, oracle_view_for
from api.scheduler.leader import SchedulerAlreadyRunningError
from api.scheduler.service import SchedulerService, build_policy
from api.serving import PortUnavailableError, listen, serve_until_signal
from api.settings import Settings, read_settings
from jigsaw.model.environment import InvalidSettingError
from jigsaw.model.errors import InvalidSpecError

log = logging.getLogger("jigsaw.server")


def load_settings(**overrides: object) -> Settings:
    """The service's settings, and the Ray runtime's too when it will run gangs: a rejected
    value stops start-up with one line (never later, in the scheduler thread)."""
    try:
        settings = read_settings(**overrides)
        if settings.executor == "ray":
            # Lazy: the runtime's settings module imports neither Ray nor torch.
            from worker.runtime.settings import RuntimeSettings

            RuntimeSettings.from_env()
    except InvalidSettingError as error:
        raise SystemExit(f"jigsaw: invalid setting: {error}") from None
    return settings


def check_policy(settings: Settings, oracle: OracleView) -> None:
    """Fail at start, not in the scheduler thread, on an unknown policy or bad options."""
    try:
        build_policy(settings, oracle)
    except (InvalidSpecError, TypeError, ValueError) as error:
        raise SystemExit(f"jigsaw: JIGSAW_POLICY={settings.policy!r}: {error}") from None


def prepare_database(settings: Settings) -> Engine:
    engine = make_engine(settings.resolved_database_url)
    wait_for_database(engine)
    upgrade_to_head(engine)
    # /readyz inspects the revision on every probe; alembic would log each time.
    logging.getLogger("alembic.runtime.migration").setLevel(logging.WARNING)
    return engine


def _configure_logging() -> None:
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )


def serve(host: str = "127.0.0.1", port: int = 8765) -> None:
    """Run the control plane: REST API, and the scheduler loop unless JIGSAW_SCHEDULER=off."""
    _configure_logging()
    settings = load_settings(host=host, port=port)
    try:
        sock = listen(host, port)  # first: a port in use must not start the scheduler or Ray
    except PortUnavailableError as error:
        raise SystemExit(f"jigsaw: {error}") from None
    engine = prepare_database(settings)
    log.info(ensure_admin_token(settings, engine))
    state = build_state(settings, engine)
    check_policy(settings, state.oracle)
    if settings.scheduler == "embedded":
        start_ray(settings)
        state.scheduler = SchedulerService(settings, engine, state.metrics, state.oracle)
        state.scheduler.start_in_thread()
    app = create_app(state=state)
    log.info(
        "JigSaw control plane on %s, dashboard %s/ (database %s, executor %s, policy %s)",
        settings.public_url,
        settings.public_url,
        engine.url.render_as_string(hide_password=True),
        settings.executor,
        settings.policy,
    )
    stopped_by = None
    try:
        stopped_by = serve_until_signal(app, sock)
    finally:
        if state.scheduler is not None:
            state.scheduler.stop()
        stop_ray(settings)
        engine.dispose()
    if stopped_by is not None:
        log.info("%s: requests drained, scheduler stopped; shut down", stopped_by)


def start_ray(settings: Settings) -> None:
    """Join or start Ray here, on the main thread, before uvicorn takes SIGTERM over
    (``worker.runtime.inventory.connect`` says why); the scheduler thread finds it running."""
    if settings.executor != "ray":
        return
    from worker.runtime.inventory import connect  # lazy: Ray only where it runs
    from worker.runtime.settings import RuntimeSettings

    log.info("starting Ray (executor ray)")
    connect(RuntimeSettings.from_env())


def stop_ray(settings: Settings) -> None:
    """Stop every Ray process this one started (``worker.runtime.inventory.disconnect``)."""
    if settings.executor != "ray":
        return
    from worker.runtime.inventory import disconnect  # lazy: Ray only where it runs

    disconnect()


def run_scheduler() -> None:
    """Run only the scheduler loop (``jigsaw-cli scheduler``), until SIGINT/SIGTERM."""
    _configure_logging()
    settings = load_settings()
    engine = prepare_database(settings)
    oracle = oracle_view_for(settings)
    check_policy(settings, oracle)
    service = SchedulerService(settings, engine, Metrics(engine), oracle)
    stopping = threading.Event()

    def _stop(_signum: int, _frame: FrameType | None) -> None:
        stopping.set()
        service.stop(timeout=0)

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    log.info("JigSaw scheduler (policy %s, executor %s)", settings.policy, settings.executor)
    try:
        service.run()
    except SchedulerAlreadyRunningError as error:
        print(f"jigsaw scheduler: {error}", file=sys.stderr)
        raise SystemExit(1) from None
    finally:
        stop_ray(settings)
        engine.dispose()
