"""The ``sago`` command line: one module per command, above the flows.

Each command module has ``add_parser(commands)`` (its options) and ``command(args)`` (what it
does, an exit code); ``sago_cli.main`` builds the parser from them and dispatches. Inputs
are parsed and checked here, before Prefect starts or any model loads.
"""
