"""``logger=wandb``: one W&B run per cell, written by the harness itself, and a table run per sweep.

Why the harness and not fairseq's own ``--wandb-project``: fairseq names every run after its save
directory (``checkpoints``), passes the project to ``wandb.init`` (which beats the user's
``WANDB_PROJECT``), and writes its own config sections (``model``, ``generation``...) that clash
with the cell's config keys (W&B refuses to change a config value, and fairseq-train would stop).
So fairseq children get no W&B settings at all; the harness reads fairseq's JSON log lines as they
stream in (``train_inner``, ``train``, ``valid``: loss, ppl, lr, wps... against updates, under the
same ``<tag>/<key>`` names fairseq's W&B wrapper uses) and logs them, the config, and the scores
into one run whose id is fixed by the sweep and the cell, so a resumed cell continues its run.

W&B's own environment variables (``WANDB_MODE``, ``WANDB_PROJECT``, ``WANDB_ENTITY``, ``WANDB_DIR``,
``WANDB_RUN_GROUP``, ``WANDB_NOTES``) win over the ``logger`` config: a config value is passed to
``wandb.init`` only where the variable is unset (``wandb.init``'s arguments would beat the variables).
``WANDB_TAGS`` replaces ``logger.tags``; the project's own tags stay either way. Credentials stay in W&B's
own settings: nothing here reads or writes them.
"""

import hashlib
import json
import os
import secrets
import sys
from dataclasses import dataclass
from pathlib import Path

from posenc.cells.layout import PROVENANCE_FILE, RESULT_FILE, TRAIN_LOG
from posenc.cells.record import is_ok, is_pruned
from posenc.harness.config.logger import GROUP_MAX, TAG_MAX, import_wandb
from posenc.harness.errors import ConfigError
from posenc.harness.fairseq_logs import parse_record, wandb_metrics

SWEEP_ID_FILE = ".wandb-sweep-id"
RUN_ID_FILE = ".wandb-run-id"  # in a cell directory: the W&B run that holds this cell's result
# A config value reaches wandb.init only when W&B's own variable is not set (the variable wins).
ENV_OVER_CONFIG = {"mode": "WANDB_MODE", "project": "WANDB_PROJECT", "entity": "WANDB_ENTITY", "dir": "WANDB_DIR",
                   "group": "WANDB_RUN_GROUP", "notes": "WANDB_NOTES"}
TAGS_ENV = "WANDB_TAGS"


def sweep_token(home: Path) -> str:
    """A random id kept in the sweep (or single run) directory: the same for every cell and every
    rerun of this sweep, new for a new sweep, even at the same path. Created once; when several
    cells start at once, the first link wins and the others read it."""
    home = Path(home)
    path = home / SWEEP_ID_FILE
    if not path.exists():
        home.mkdir(parents=True, exist_ok=True)
        tmp = home / f".{SWEEP_ID_FILE}.{os.getpid()}.{secrets.token_hex(4)}"
        tmp.write_text(secrets.token_hex(4) + "\n", encoding="utf-8")
        try:
            os.link(tmp, path)  # atomic, and fails if another cell got there first
        except FileExistsError:
            pass
        finally:
            tmp.unlink(missing_ok=True)
    return path.read_text(encoding="utf-8").strip()


def group_name(experiment: str, sweep_dir: str, token: str) -> str:
    """The default group: the experiment and the sweep directory's name (never the path: the same sweep
    on another machine, or moved, is named alike), plus the sweep's token (a reused path is a new group)."""
    sweep = Path(str(sweep_dir)).name
    name = f"{experiment}:{sweep}:{token}"
    if len(name) <= GROUP_MAX:
        return name
    head = f"{experiment}:"
    tail = f":{token}"
    return head + "..." + sweep[-(GROUP_MAX - len(head) - len(tail) - 3):] + tail


def user_tags(logger) -> list:
    """The user's tags: ``WANDB_TAGS`` (comma-separated, as W&B reads it) where it is set, else
    ``logger.tags``."""
    if os.environ.get(TAGS_ENV):
        return [tag.strip() for tag in os.environ[TAGS_ENV].split(",") if tag.strip()]
    return [str(tag) for tag in logger.get("tags") or []]


def run_id(token: str, cell: str, config_hash: str = "") -> str:
    """Deterministic: the same sweep, cell and configuration continue the same run; a changed
    configuration (which retrains the cell from scratch) gets a run of its own."""
    digest = hashlib.sha256(f"{cell}\n{config_hash}".encode()).hexdigest()[:16]
    return f"{token}-{digest}"


@dataclass(frozen=True)
class CellIdentity:
    name: str       # the cell's override dirname, e.g. placement=source,seed=2
    home: Path      # the sweep directory (multirun) or the run directory (one cell)
    shown_dir: str  # that directory as configured, for the group name


def cell_identity(job_dir: Path, ident: CellIdentity = None) -> CellIdentity:
    """``ident`` (what ``posenc-run``'s job knows of the cell: ``posenc.harness.app.Job``), or, for a
    cell run outside it (tests, scripts), its directory's name under its parent."""
    if ident is not None:
        return ident
    job_dir = Path(job_dir)
    return CellIdentity(job_dir.name, job_dir.parent, str(job_dir.parent))


def init_kwargs(logger, **kwargs) -> dict:
    """``wandb.init`` arguments: the config's mode/project/entity/notes, the run's dir and its group (the
    config's, else the default one ``kwargs`` gives) only where W&B's variable is unset; the tags
    ``kwargs`` gives (the project's own) with the user's (``user_tags``)."""
    import wandb
    out = dict(kwargs)
    if "tags" in out:
        out["tags"] = list(dict.fromkeys([*out["tags"], *user_tags(logger)]))
    for key, variable in ENV_OVER_CONFIG.items():
        given = out.pop(key, None)  # the run's dir, the default group
        value = given if key == "dir" else logger.get(key) or given
        if value not in (None, "") and not os.environ.get(variable):
            out[key] = str(value)
    # The run's console capture would wrap this process's stdout/stderr (progress lines, Hydra's
    # logging); fairseq's output is in train.log already. Quiet: no per-run summary printout.
    out["settings"] = wandb.Settings(console="off", quiet=True)
    return out


def start(wandb, logger, **kwargs):
    """``wandb.init`` with a one-line ConfigError when W&B cannot start (no login online, ...)."""
    try:
        return wandb.init(**init_kwargs(logger, **kwargs))
    except Exception as err:  # wandb raises UsageError, CommError, ... ; all stop the cell up front
        detail = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ConfigError(f"logger=wandb: W&B could not start a run: {detail} "
                          "(log in with `wandb login` or WANDB_API_KEY, or run with WANDB_MODE=offline)") from None


class NoRun:
    """``logger=none``: the hooks do nothing."""

    def on_train_line(self, line: str) -> None:
        pass

    def finish(self, record) -> None:
        pass


class CellRun(NoRun):
    """The cell's W&B run: fairseq's curves as they stream in, the scores when the cell ends."""

    def __init__(self, run, job_dir: Path):
        self.run, self.job_dir = run, Path(job_dir)

    def on_train_line(self, line: str) -> None:
        parsed = parse_record(line)
        if parsed:
            step, metrics = wandb_metrics(*parsed)
            if metrics and step is not None:
                self.run.log(metrics, step=step)

    def finish(self, record) -> None:
        """Summary = the record's scalar fields (bleu, tok_bleu, valid_ppl, the long split's scores,
        status, error...); a cell that did not end ok (or pruned) is a failed run (exit code 1)."""
        try:
            self.run.summary.update(cell_summary(record))
            self.run.finish(exit_code=0 if is_ok(record) or is_pruned(record) else 1)  # pruned: finished, on purpose
            if not getattr(self.run, "disabled", False):  # WANDB_MODE=disabled logged nothing
                (self.job_dir / RUN_ID_FILE).write_text(self.run.id + "\n", encoding="utf-8")
        except Exception as err:  # the cell's result.json is written already; W&B must not undo it
            print(f"posenc-run: warning: W&B summary of {record.job_dir} not logged: {err}", file=sys.stderr)


def cell_summary(record) -> dict:
    """A record's (``Record``) scalar fields, for a run's summary."""
    skip = {"job_dir", "config_hash", "hypotheses"}
    return {k: v for k, v in record.to_dict().items()
            if k not in skip and not k.startswith("_") and isinstance(v, (int, float, str, bool))}


def cell_config(cell, record, git_commit: str) -> dict:
    """The resolved Hydra config of the cell (``ResolvedCell.resolved_config``), plus what it resolved to: the
    kinds used on each side, the corpus key and the code version."""
    config = dict(cell.resolved_config or {})
    config.update(encoder_pos=record.encoder_pos, decoder_pos=record.decoder_pos,
                  corpus_key=(record.corpus or {}).get("cache_key"), git_commit=git_commit)
    return config


def cell_tags(cell) -> list:
    # W&B splits WANDB_TAGS on commas and limits a tag to 64 characters.
    return [f"{k}={cell.identity[k]}".replace(",", ";")[:TAG_MAX] for k in ("model", "data", "pe", "placement")]


def cell_run_id(job_dir: Path, record, ident: CellIdentity = None):
    ident = cell_identity(job_dir, ident)
    token = sweep_token(ident.home)
    return ident, token, run_id(token, ident.name, record.config_hash or "")


def start_cell_run(cell, job_dir: Path, record, git_commit: str, ident: CellIdentity = None):
    """Open (or continue) the cell's run (``cell``: a ResolvedCell; ``ident``: ``cell_identity``'s);
    ``NoRun`` for ``logger=none``."""
    if cell.logger["name"] == "none":
        return NoRun()
    wandb = import_wandb()
    ident, token, rid = cell_run_id(job_dir, record, ident)
    run = start(wandb, cell.logger, id=rid, resume="allow", name=ident.name,
                group=group_name(cell.identity["experiment"], ident.shown_dir, token), job_type="cell",
                tags=cell_tags(cell), dir=str(ident.home))
    run.config.update(cell_config(cell, record, git_commit), allow_val_change=True)
    return CellRun(run, job_dir)


def log_finished_cell(cell, job_dir: Path, record, ident: CellIdentity = None) -> None:
    """A cell that finished before (perhaps without W&B) and has no run yet: one run from what it
    kept (fairseq's curves from its train.log, its record), so turning W&B on never retrains."""
    if cell.logger["name"] == "none":
        return
    job_dir = Path(job_dir)
    _, _, rid = cell_run_id(job_dir, record, ident)
    marker = job_dir / RUN_ID_FILE
    if marker.exists() and marker.read_text(encoding="utf-8").strip() == rid:
        return
    try:
        git_commit = json.loads((job_dir / PROVENANCE_FILE).read_text(encoding="utf-8"))["git_commit"]
    except (OSError, ValueError, KeyError):
        git_commit = "unknown"
    run = start_cell_run(cell, job_dir, record, git_commit, ident)
    log = job_dir / TRAIN_LOG
    if log.exists():
        for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
            run.on_train_line(line)
    run.finish(record)


# --- the sweep's table run -------------------------------------------------------------------------

def sweep_figures(sweep_dir: Path) -> list:
    """PNG figures the report wrote into the sweep directory (not the cells' or W&B's own files)."""
    sweep_dir = Path(sweep_dir)
    found = []
    for entry in sorted(sweep_dir.iterdir()):
        if entry.is_file() and entry.suffix == ".png":
            found.append(entry)
        elif entry.is_dir() and not (entry / RESULT_FILE).exists() and entry.name not in ("wandb", ".submitit"):
            found += sorted(entry.rglob("*.png"))
    return found


def log_sweep_table(config, report) -> None:
    """At sweep end: the table of ``report`` (the one the sweep's table.md was rendered from, power
    columns included) and the figures, in one run of the sweep's group, job_type ``table``. A
    failure is one warning line: the sweep's own tables are written already."""
    if config.logger.name != "wandb":
        return
    from posenc.report.rows import as_dicts  # the report's own rows as plain dicts
    sweep_dir = Path(report.sweep.dir)
    try:
        wandb = import_wandb()
        rows = as_dicts(report)
        token = sweep_token(sweep_dir)
        group = group_name(config.experiment_name, str(config.hydra.sweep.dir), token)
        run = start(wandb, config.logger, id=run_id(token, "table"), resume="allow", name="table", group=group,
                    job_type="table", tags=[f"experiment={config.experiment_name}"], dir=str(sweep_dir))
        columns = list(rows[0]) if rows else ["placement"]
        table = wandb.Table(columns=columns, data=[[row.get(c) for c in columns] for row in rows],
                            allow_mixed_types=True)
        logged = {"results": table}
        logged.update({f"figures/{png.stem}": wandb.Image(str(png)) for png in sweep_figures(sweep_dir)})
        run.log(logged)
        run.summary.update({"groups": len(rows), "cells_ok": sum(r.get("seeds_ok", 0) for r in rows),
                            # not_ok: "seed 2 failed; seed 3 interrupted" (as_dicts joins the report's list)
                            "cells_not_ok": sum(len([c for c in str(r.get("not_ok") or "").split("; ") if c])
                                                for r in rows)})
        run.finish()
    except Exception as err:
        print("posenc-run: warning: the sweep table was not logged to W&B: "
              f"{str(err).splitlines()[0] if str(err) else type(err).__name__}",
              file=sys.stderr)
