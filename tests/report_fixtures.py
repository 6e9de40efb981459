"""Hand-made sweeps for the report's tests and benchmark: a prepared-corpus entry holding only what
the report reads (manifest, raw test references and sources), cells whose ``result.json`` is
scored by sacreBLEU's own API on the hypothesis files written beside it, and Hydra plans."""

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import yaml
from sacrebleu.metrics import BLEU

from posenc.corpora.cache import entry_dir
from posenc.corpora.synthetic import GeneratorConfig, generate

SIGNATURE_BLEU = BLEU()


def synthetic_test_sets(test=60, test_long=40, seed=1234):
    """``{split: (sources, references)}`` from the embedded grammar (test and test_long)."""
    pairs = generate(GeneratorConfig(seed=seed, train=50, valid=5, test=test, test_long=test_long))
    return {split: pairs[split] for split in ("test", "test_long") if pairs.get(split) and pairs[split][0]}


def write_testset(cache_root: Path, splits: dict, name="synthetic", key=None) -> dict:
    """A cache entry for the test splits; returns the corpus part of a record (as prepared.record())."""
    key = key or ("ab" * 32)
    entry = entry_dir(cache_root, name, key)
    (entry / "raw").mkdir(parents=True, exist_ok=True)
    for split, (sources, refs) in splits.items():
        (entry / "raw" / f"{split}.en").write_text("".join(s + "\n" for s in sources), encoding="utf-8")
        (entry / "raw" / f"{split}.vf").write_text("".join(r + "\n" for r in refs), encoding="utf-8")
    manifest = {
        "name": name, "cache_key": key, "bin_dir": "bin", "src": "en", "tgt": "vf", "remove_bpe": "subword_nmt",
        "subsets": {"train": "train", "valid": "valid", "test": "test", "test_long": "test1"},
        "test_refs": {s: f"raw/{s}.vf" for s in splits}, "test_sources": {s: f"raw/{s}.en" for s in splits},
        "test_sizes": {s: len(v[0]) for s, v in splits.items()}, "lowercased": False, "filter_stats": {},
        "text_settings": {}, "subword_kind": "bpe", "sizes": {},
    }
    (entry / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    return {"name": name, "cache_key": key, "dir": str(entry), "src": "en", "tgt": "vf", "lowercased": False}


def degrade(refs, rate: float, seed: int) -> list:
    """Hypotheses made from the references: each word dropped or replaced with probability ``rate``."""
    rng = random.Random(seed)
    out = []
    for line in refs:
        words = [w if rng.random() >= rate else rng.choice(["xx", "the", ""]) for w in line.split()]
        out.append(" ".join(w for w in words if w))
    return out


def write_cell(sweep: Path, name: str, corpus: dict, splits: dict, hyps: dict, status="ok", **fields) -> dict:
    """A cell directory: hypothesis files and a result.json scored on them with sacreBLEU."""
    job = Path(sweep) / name
    job.mkdir(parents=True, exist_ok=True)
    record = {"experiment": "table4", "model": "fconv_small", "data": "synthetic", "pe": "learned",
              "placement": "both", "seed": 1, "status": status, "error": "" if status == "ok" else "boom",
              "valid_ppl": 1.5, "num_updates": 10, "train_wall_s": 1.0, "job_dir": str(job), "corpus": corpus}
    record.update(fields)
    if status == "ok":
        for split, lines in hyps.items():
            suffix = "" if split == "test" else f"_{split}"
            file = "hypotheses.txt" if split == "test" else f"hypotheses.{split}.txt"
            (job / file).write_text("".join(line + "\n" for line in lines), encoding="utf-8")
            refs = splits[split][1]
            metric = BLEU()
            record[f"bleu{suffix}"] = round(metric.corpus_score(lines, [refs]).score, 2)
            record[f"bleu_signature{suffix}"] = str(metric.get_signature())
            record[f"tok_bleu{suffix}"] = round(BLEU(tokenize="none", force=True).corpus_score(lines, [refs]).score, 2)
            record[f"hypotheses{suffix}"] = file
            record[f"test_sentences{suffix}"] = len(lines)
    (job / "result.json").write_text(json.dumps(record), encoding="utf-8")
    return record


def write_plan(sweep: Path, params: dict, task: list, model="fconv_small", family="fconv", pe="learned",
               placement="both", skip_impossible=False) -> None:
    """A ``multirun.yaml`` with the fields the plan reads, laid out as Hydra saves it."""
    plan = {
        "hydra": {"sweeper": {"_target_": "hydra._internal.core_plugins.basic_sweeper.BasicSweeper",
                              "max_batch_size": None, "params": params or None},
                  "overrides": {"hydra": [f"hydra.sweep.dir={sweep}"], "task": list(task)},
                  "job": {"config": {"override_dirname": {
                      "kv_sep": "=", "item_sep": ",",
                      "exclude_keys": ["experiment", "data.train", "data.valid", "data.test", "paths.cache_dir",
                                       "progress"]}}}},
        "model": {"name": model, "family": family}, "pe": pe, "placement": placement, "seed": 1,
        "skip_impossible": skip_impossible,
    }
    Path(sweep).mkdir(parents=True, exist_ok=True)
    (Path(sweep) / "multirun.yaml").write_text(yaml.safe_dump(plan), encoding="utf-8")


def cli_p_value(tmp_path: Path, refs, base, system, flag: str, n: int, seed: str = "12345") -> float:
    """The p-value of ``system`` against ``base`` from the ``sacrebleu`` command line
    (``--paired-bs`` or ``--paired-ar``, ``n`` resamples or trials)."""
    files = {}
    for name, lines in (("ref", refs), ("base", base), ("sys", system)):
        files[name] = Path(tmp_path) / f"{name}.txt"
        files[name].write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    n_flag = "--paired-bs-n" if flag == "--paired-bs" else "--paired-ar-n"
    out = subprocess.run([str(Path(sys.executable).parent / "sacrebleu"), str(files["ref"]), "-i", str(files["base"]),
                          str(files["sys"]), flag, n_flag, str(n), "-f", "json"], capture_output=True, text=True,
                         timeout=300, env=dict(os.environ, SACREBLEU_SEED=seed))
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)[1]["BLEU"]["p_value"]


def masked(refs, rate: float, seed: int) -> list:
    """Each word dropped where its own uniform (fixed by ``seed``) is below ``rate``: outputs of one
    seed at two rates differ only in the words between the rates (tiny sentence noise)."""
    rng = random.Random(seed)
    return [" ".join(w for w in line.split() if rng.random() >= rate) for line in refs]


def sweep_of(root, name, corpus, splits, outputs: dict) -> Path:
    """A sweep with one cell per (placement, seed): ``outputs[placement][seed]`` its test hypotheses."""
    sweep = root / name
    for placement, by_seed in outputs.items():
        for seed, hyps in by_seed.items():
            write_cell(sweep, f"placement={placement},seed={seed}", corpus, splits, {"test": hyps},
                       placement=placement, seed=seed)
    return sweep

