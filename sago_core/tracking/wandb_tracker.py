"""Log a finished run to Weights & Biases: one W&B run per (sago run, model), grouped by
the model's family (the experiment MLflow would put it in), its parameters as the run's
config, its metrics logged once at step 0 (so they are also its summary), its files saved
with it.

Online or offline is W&B's own setting unless the section names a mode: an offline run
stays in W&B's folder until ``wandb sync``. The run id is stable per (sago run, model), so
logging a run again resumes the W&B run it made the first time.
"""

from __future__ import annotations

import netrc
import os
import shutil
from pathlib import Path
from urllib.parse import urlsplit

from sago_core.config.tracking import WandbSettings
from sago_core.tracking.common import TrackerUnavailable, experiment_name, wandb_run_id
from sago_core.tracking.record import RunRecord

NO_LOGIN = "no W&B login: run `wandb login`, set WANDB_API_KEY, or use mode: offline"
DEFAULT_HOST = "https://api.wandb.ai"
# W&B's modes in which nothing is sent to its server, so no login is needed.
LOCAL_MODES = ("offline", "dryrun", "disabled")


def _mode(settings: WandbSettings) -> str:
    """The mode W&B will run in: the section's, else ``WANDB_MODE``, else online."""
    return settings.mode or os.environ.get("WANDB_MODE", "").strip().lower() or "online"


def _netrc_login(host: str) -> bool:
    path = Path(os.environ.get("NETRC") or Path.home() / ".netrc").expanduser()
    try:
        return path.is_file() and netrc.netrc(path).authenticators(host) is not None
    except (OSError, netrc.NetrcParseError):
        return False


def _wandb_login(host: str) -> bool:
    """W&B's own lookup (environment, netrc, its settings file), told never to prompt.
    Its module moves between releases: where it is not found, the netrc alone decides."""
    try:
        from wandb.sdk.lib.wbauth import authenticate_session

        found = authenticate_session(host=host, source="sago", prompt=False, update_session=False)
    except Exception:  # an older W&B, or a login it cannot read: no login found
        return False
    return found is not None


def has_login() -> bool:
    """Whether W&B has an API key for its server without asking for one: ``wandb.init``
    online with no key waits on a login prompt, which would hang a finished run."""
    if os.environ.get("WANDB_API_KEY") or os.environ.get("WANDB_IDENTITY_TOKEN_FILE"):
        return True
    host = os.environ.get("WANDB_BASE_URL") or DEFAULT_HOST
    return _netrc_login(urlsplit(host).hostname or host) or _wandb_login(host)


def log_to_wandb(run: RunRecord, settings: WandbSettings) -> list[str]:
    """Every model of ``run``; the W&B run ids. Raises ``TrackerUnavailable`` online with
    no login (never prompts) or when W&B fell back to offline, and whatever W&B raises
    when it cannot log (the caller warns)."""
    online = _mode(settings) not in LOCAL_MODES
    if online and not has_login():
        raise TrackerUnavailable(NO_LOGIN)
    import wandb

    logged = []
    for record in run.models:
        if settings.dir is not None:
            settings.dir.mkdir(parents=True, exist_ok=True)
        wb_run = wandb.init(
            project=settings.project,
            entity=settings.entity,
            mode=settings.mode,
            dir=str(settings.dir) if settings.dir is not None else None,
            id=wandb_run_id(run.run_id, record.model),
            name=f"{run.run_id} {record.tags['sago.model']}",
            group=experiment_name(record.model),
            config={**record.params, **record.tags},
            tags=["sago"],
            resume="allow",
            reinit="create_new",
            # The run's own console and the machine's statistics are not the results.
            settings=wandb.Settings(
                console="off",
                silent=True,
                x_disable_stats=True,
                init_timeout=settings.timeout_s,
            ),
        )
        if online and (wb_run.offline or wb_run.disabled):  # W&B gave up on its server
            wb_run.finish()
            raise TrackerUnavailable(
                f"W&B started run {wb_run.id} offline, not on its server (wandb sync uploads it)"
            )
        try:
            wb_run.log(record.metrics, step=0)
            for path in record.files:  # W&B uploads what its run folder holds at the end
                shutil.copy2(path, Path(wb_run.dir) / path.name)
        finally:
            wb_run.finish()
        logged.append(str(wb_run.id))
    return logged
