"""``python -m api [--scheduler-only]``: host and port come from JIGSAW_HOST / JIGSAW_PORT."""

from __future__ import annotations

import argparse

from api.server import load_settings, run_scheduler, serve


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m api", description=__doc__)
    parser.add_argument("--host", help="listen address (default JIGSAW_HOST or 127.0.0.1)")
    parser.add_argument("--port", type=int, help="listen port (default JIGSAW_PORT or 8765)")
    parser.add_argument("--scheduler-only", action="store_true", help="run only the scheduler loop")
    args = parser.parse_args()
    if args.scheduler_only:
        run_scheduler()
        return
    settings = load_settings()
    serve(host=args.host or settings.host, port=args.port or settings.port)


if __name__ == "__main__":
    main()
