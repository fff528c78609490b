"""Names vulture cannot see being used (``make lint`` passes this file to it): each is called
by a framework, named in a string, or read by a library. Every entry says which."""

# ruff: noqa: B018  (each line "uses" a name for vulture; that is the whole file)
from vulture.whitelist_utils import Whitelist

_ = Whitelist()

# Registries import these by their "package.module:function" string (registry/backends.py,
# registry/axes.py), so that a backend's or an axis's heavy imports wait until it is used.
_.open_target
_.act_delta_rule
_.prob_delta_rule
_.ent_delta_rule
_.mr_delta_rule
_.bleu_delta_rule
_.bert_delta_rule
_.lang_delta_rule
# tracking/track.py's LOGGERS name each tracker's logger by its "module:function" string.
_.log_to_mlflow
_.log_to_wandb
# The example plug-in's entry points name these (tests/plugin_package/pyproject.toml and the
# family's "module:function" transform); sago reads them through importlib.metadata.
_.ECHO
_.EMPHASIS
_.emphasise
# A device worker imports the bench's paced flow by its "module:function" string.
_.paced_shard_flow
# A deployment entrypoint in deployments/prefect.yaml (flows/watch.py:evaluate_models).
_.evaluate_models
# Prefect's LockManager protocol: Prefect calls these (flows/runtime/process_locks.py).
_.aacquire_lock
_.await_for_lock
# argparse calls these; sago_cli overrides them: the parser's choice check (parser.py) and
# the help formatter's list of subcommands (main.py, which lists them by group instead).
_._check_value
_._iter_indented_subactions
# A module-level __getattr__ (PEP 562): schemas.INSTANCES is computed when asked for.
_.__getattr__
# pydantic reads each model's configuration from this class attribute.
_.model_config
# Read by their libraries: LiteLLM's module settings, a tokenizers Tokenizer's pre-tokenizer.
_.suppress_debug_info
_.telemetry
_.pre_tokenizer
# Arguments that only key a cache: the file's mtime in gguf_probe's lru_cache, the data
# files' digest in the load-prompts task's Prefect cache key (edited data is loaded again).
_.mtime_ns
_.prompt_source_digest

# Tests. pytest reads module-level marks and calls its hooks by name.
_.pytestmark
_.pytest_configure
_.pytest_collection_modifyitems
_.pytest_runtest_logreport
_.pytest_terminal_summary
# Fixtures a test asks for by parameter name for their side effect (a server, an offline
# hub, a registered toy backend, a detached store), never read in the test's body.
_.harness
_.hub_cache
_.hub_on
_.fake_hub
_.toy
_.detached
# The standard library calls these on a handler or parser: http.server's request handler
# and server (fake OpenAI and hub servers), html.parser's start-tag callback.
_.do_GET
_.do_POST
_.log_message
_.protocol_version
_.close_connection
_.daemon_threads
_.handle_starttag
# tempfile reads its module-level tempdir; tests reset it so that TMPDIR is read again.
_.tempdir
# transformers' Trainer and its callbacks call these hooks by name (sago train's trainers,
# sago_core/training/trainers.py and checkpoint.py; the series' saver in checkpoints/series.py).
_._save_optimizer_and_scheduler
_._load_optimizer_and_scheduler
_._save_rng_state
_._load_rng_state
_.compute_loss
_.model_accepts_loss_kwargs
_.on_train_begin
_.on_step_end
_.on_log
_.on_save
# A paired test's fields reach the paired table whole (dataclasses.asdict into PAIRED's
# columns, sago_core/statistics/paired_runs.py); no code names this one.
_.p_wilcoxon
