"""A data-bin's sentences as text again, run as a child (``python -m posenc.corpora.fairseq_text``) so
that the harness never imports fairseq: each side of a split through fairseq's own dictionary, with the
subword marks removed as ``fairseq-generate --post-process`` removes them, and an unknown word of a
reference as fairseq-generate prints it (``<<unk>>``, which no output matches).

    python -m posenc.corpora.fairseq_text JOBS.json

JOBS.json: a list of ``{"prefix", "dictionary", "post_process", "out", "escape_unk"}``; each writes one
line a sentence to ``out``. Prints the sentences of each, as a JSON list."""

import json
import sys


def decode(prefix: str, dictionary: str, post_process: str, escape_unk: bool) -> list:
    from fairseq.data import Dictionary, data_utils

    vocab = Dictionary.load(dictionary)
    dataset = data_utils.load_indexed_dataset(prefix, vocab)
    if dataset is None:
        raise SystemExit(f"{prefix}: fairseq cannot read it as a dataset")
    return [vocab.string(dataset[i], post_process or None, escape_unk=escape_unk) for i in range(len(dataset))]


def main(argv=None) -> None:
    with open((argv or sys.argv[1:])[0], encoding="utf-8") as handle:
        jobs = json.load(handle)
    counts = []
    for job in jobs:
        lines = decode(job["prefix"], job["dictionary"], job["post_process"], job["escape_unk"])
        with open(job["out"], "w", encoding="utf-8") as out:
            out.writelines(line + "\n" for line in lines)
        counts.append(len(lines))
    print(json.dumps(counts))


if __name__ == "__main__":
    main()
