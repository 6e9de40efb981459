"""Writing a cell's ``result.json``; the record's schema lives in ``posenc.cells.schema``."""

import hashlib
import json
from pathlib import Path

from omegaconf import OmegaConf

from posenc.atomic import write_json_atomic
from posenc.cells.keys import NOT_OUTCOME
from posenc.cells.layout import RESULT_FILE
from posenc.cells.schema import new_record


def config_hash(cfg, ignore=()) -> str:
    """Fingerprint of everything that determines a cell's outcome (the resolved config without
    the keys, top-level or dotted, in NOT_OUTCOME and ``ignore``)."""
    return digest(hashed_config(cfg, ignore))


def hashed_config(cfg, ignore=()) -> dict:
    """What ``config_hash`` fingerprints, as plain data. Keys are resolved one by one, so an
    ignored top-level key is never resolved (``runtime`` reads the launcher's settings, which
    exist only inside a job)."""
    skip = set(NOT_OUTCOME) | set(ignore)
    data = {key: OmegaConf.to_container(cfg[key], resolve=True) if OmegaConf.is_config(cfg[key]) else cfg[key]
            for key in cfg if key not in skip}
    for dotted in (k for k in skip if "." in k):
        *parents, leaf = dotted.split(".")
        node = data
        for part in parents:
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, dict):
            node.pop(leaf, None)
    return data


def digest(data: dict) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


def base_record(cfg, spec, job_dir: Path) -> dict:
    """A cell's record as it starts: ``running``, its identity, no scores yet."""
    identity = {"experiment": cfg.experiment_name, "model": cfg.model.name, "data": cfg.data.name, "pe": cfg.pe,
                "placement": cfg.placement, "encoder_pos": spec.encoder_pos, "decoder_pos": spec.decoder_pos,
                "seed": int(cfg.seed)}
    return {**new_record(identity, job_dir, spec.family), "config_hash": config_hash(cfg), "resumed_from_update": 0}


def refused_record(cfg, job_dir: Path, error: str) -> dict:
    """The record of a sweep cell refused before any work (a value it cannot take): failed, with
    the refusal as its error, so the sweep goes on and its table shows the cell."""
    get = lambda key: OmegaConf.select(cfg, key, default=None)  # noqa: E731 (any of them may be the bad one)
    identity = {"experiment": get("experiment_name"), "model": get("model.name"), "data": get("data.name"),
                "pe": get("pe"), "placement": get("placement"), "encoder_pos": "", "decoder_pos": "",
                "seed": get("seed")}
    return {**new_record(identity, job_dir, get("model.family"), error), "resumed_from_update": 0}


def write_result(job_dir: Path, record: dict) -> None:
    write_json_atomic(Path(job_dir) / RESULT_FILE, record)
