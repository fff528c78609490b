"""``sago server-setup``: work pools, one GPU queue per device and the dead-worker automation
on the Prefect server at PREFECT_API_URL (``flows.runtime.server_setup``)."""

from __future__ import annotations

import argparse
from typing import Any


def add_parser(commands: Any) -> None:
    server = commands.add_parser(
        "server-setup",
        help="set up the Prefect server at PREFECT_API_URL (work pools, one GPU queue per "
        "device, the dead-worker automation)",
    )
    server.add_argument(
        "--devices",
        type=int,
        default=1,
        help="GPU queues device-0..N-1, one per worker (devices / devices_per_worker)",
    )
    server.add_argument(
        "--silence",
        type=int,
        default=600,
        help="seconds without a heartbeat before a run is crashed (workers send one every "
        "PREFECT_FLOWS_HEARTBEAT_FREQUENCY s, default 180)",
    )


def command(args: argparse.Namespace) -> int:
    from sago.flows.runtime.server_setup import setup_server

    for line in setup_server(args.devices, silence_s=args.silence) or ["nothing to do"]:
        print(line)
    return 0
