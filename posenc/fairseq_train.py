"""``python -m posenc.fairseq_train ARGS``: fairseq-train, except that ``--bf16``
trains in bfloat16 on the GPU instead of asking for a TPU.

fairseq's option post-processing turns every ``--bf16`` into ``--tpu`` (``fairseq/options.py``;
fairseq issue #4696), so stock ``fairseq-train --bf16`` on a CUDA machine looks for torch_xla and
stops. The trainer and FP16Optimizer already handle bf16 on any device (bf16 weights, fp32 master
copies, no loss scaling); only that coupling is in the way. This entry parses the arguments with
fairseq's own parser, keeps ``--tpu`` only when it was asked for, and runs fairseq-train's
``main`` through fairseq's own launcher, as ``fairseq_cli.train.cli_main`` does. It lives outside the plugin
package so that nothing imports fairseq before ``fairseq_cli.train`` sets up fairseq's logging. The harness uses
it only for ``precision=bf16``; every other cell runs the stock ``fairseq-train``.
"""

# fairseq_cli.train first: importing it sets up fairseq's log format (``| INFO | valid | {...}``,
# on stdout) before anything else imports fairseq, exactly as in the stock fairseq-train script.
from fairseq_cli import train  # isort: skip

import sys  # noqa: E402

from fairseq import options  # noqa: E402
from fairseq.dataclass.utils import convert_namespace_to_omegaconf  # noqa: E402
from fairseq.distributed import utils as distributed_utils  # noqa: E402


def parse(argv):
    """fairseq-train's configuration of ``argv``, with ``--tpu`` only where it was asked for."""
    args = options.parse_args_and_arch(options.get_training_parser(), input_args=list(argv))
    if args.bf16 and "--tpu" not in argv:
        args.tpu = False
    return convert_namespace_to_omegaconf(args)


def main(argv=None) -> None:
    distributed_utils.call_main(parse(sys.argv[1:] if argv is None else argv), train.main)


if __name__ == "__main__":
    main()
