"""Writing a cell's ``result.json``; the record's schema lives in ``posenc.report.records``."""

import hashlib
import json
from pathlib import Path

from omegaconf import OmegaConf

from posenc.atomic import write_json_atomic
from posenc.report.records import FIELDS, HYPOTHESES_FILE, RESULT_FILE, read_result  # noqa: F401 (re-exported)


def config_hash(cfg) -> str:
    """Fingerprint of everything that determines a cell's outcome (the resolved config without
    Hydra's own node and the knobs that only change how a run is shown or logged)."""
    data = OmegaConf.to_container(cfg, resolve=True)
    for key in ("hydra", "progress", "paths", "logger"):
        data.pop(key, None)
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


def base_record(cfg, spec, job_dir: Path) -> dict:
    return {
        "experiment": cfg.experiment_name, "model": cfg.model.name, "data": cfg.data.name, "pe": cfg.pe,
        "placement": cfg.placement, "encoder_pos": spec.encoder_pos, "decoder_pos": spec.decoder_pos,
        "seed": int(cfg.seed), "status": "failed", "error": "", "bleu": None, "bleu_signature": "",
        "tok_bleu": None, "valid_ppl": None, "test_sentences": None, "num_updates": None,
        "train_wall_s": None, "hypotheses": "", "job_dir": str(job_dir), "config_hash": config_hash(cfg),
    }


def write_result(job_dir: Path, record: dict) -> None:
    write_json_atomic(Path(job_dir) / RESULT_FILE, record)
