"""Building stock and posenc fairseq models in-process, the way fairseq-train does."""

import torch
from fairseq import options
from fairseq.data import Dictionary

import posenc.fairseq_plugin  # noqa: F401  (registers the posenc_* models)

PAD = 1


def make_dictionary(num_words: int = 40) -> Dictionary:
    d = Dictionary()
    for i in range(num_words):
        d.add_symbol(f"w{i}")
    d.finalize(padding_factor=8)
    return d


class DummyTask:
    """What build_model reads from a translation task: its two dictionaries."""

    def __init__(self, src_dict=None, tgt_dict=None):
        self.source_dictionary = src_dict or make_dictionary()
        self.target_dictionary = tgt_dict or self.source_dictionary


def parse_args(arch: str, *extra: str):
    """Arguments exactly as fairseq-train resolves them: parser, model args, architecture."""
    parser = options.get_training_parser()
    return options.parse_args_and_arch(parser, ["data-bin-unused", "--task", "translation", "--arch", arch, *extra])


def build(arch: str, *extra: str, task=None, seed: int = 0):
    args = parse_args(arch, *extra)
    torch.manual_seed(seed)
    from fairseq.models import ARCH_MODEL_REGISTRY
    model = ARCH_MODEL_REGISTRY[arch].build_model(args, task or DummyTask())
    return model.eval(), args


def random_batch(dictionary, bsz=3, src_len=7, tgt_len=5, seed=1, pad_source=True):
    """A left-padded source batch and right-padded previous-output tokens, as fairseq feeds them."""
    g = torch.Generator().manual_seed(seed)
    low, high = dictionary.nspecial, len(dictionary)
    src = torch.randint(low, high, (bsz, src_len), generator=g)
    if pad_source and bsz > 1:
        src[0, :2] = PAD  # left padding on the first sentence
    src_lengths = src.ne(PAD).sum(1)
    prev = torch.randint(low, high, (bsz, tgt_len), generator=g)
    prev[:, 0] = dictionary.eos()
    if bsz > 1:
        prev[-1, -1] = PAD  # right padding on the last target
    return src, src_lengths, prev


def decoder_output(model, src, src_lengths, prev):
    with torch.no_grad():
        out, _ = model(src, src_lengths, prev)
    return out
