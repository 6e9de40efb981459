"""result.json: one record per cell, the fields every table and outside check reads."""

import hashlib
import json
from pathlib import Path

from omegaconf import OmegaConf

from posenc.atomic import write_json_atomic

RESULT_FILE = "result.json"
HYPOTHESES_FILE = "hypotheses.txt"

# The contract's columns, in table order (results.csv keeps this order, extras after).
FIELDS = ("experiment", "model", "data", "pe", "placement", "encoder_pos", "decoder_pos", "seed", "status",
          "error", "bleu", "bleu_signature", "tok_bleu", "valid_ppl", "test_sentences", "num_updates",
          "train_wall_s", "hypotheses", "job_dir")


def config_hash(cfg) -> str:
    """Fingerprint of everything that determines a cell's outcome (the resolved config without
    Hydra's own node and the knobs that only change how a run is shown)."""
    data = OmegaConf.to_container(cfg, resolve=True)
    for key in ("hydra", "progress", "paths"):
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


def read_result(job_dir: Path):
    path = Path(job_dir) / RESULT_FILE
    if not path.exists():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None  # a torn or foreign file: the cell counts as not finished


def write_result(job_dir: Path, record: dict) -> None:
    write_json_atomic(Path(job_dir) / RESULT_FILE, record)
