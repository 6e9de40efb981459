"""fairseq plugin: ``fairseq-train --user-dir posenc/fairseq_plugin``.

fairseq imports this directory as a top-level module named ``fairseq_plugin``; a process may
also import it as ``posenc.fairseq_plugin``. The registrations live in modules imported by their
absolute names only, so Python runs them once whichever way (or both ways) the plugin is loaded,
and fairseq never sees a duplicate registration.
"""

from posenc.kinds.file import load_from_environment

# A user's own kinds file (posenc-run's kinds_module=, or POSENC_KINDS_MODULE by hand), registered
# before fairseq builds its parser, so --encoder-pos / --decoder-pos take its kinds.
load_from_environment()

import posenc.fairseq_plugin.fconv  # noqa: E402, F401  (registers posenc_fconv and its architectures)
import posenc.fairseq_plugin.transformer  # noqa: E402, F401  (registers posenc_transformer and its architectures)
