"""Reading: what a fairseq checkpoint holds, in the analysis's terms. The file and its arguments
(``fairseq_checkpoint``), the position tables of each side (``position_tables``), the rows training
reached (``optimizer_state``), the weights a table meets in the model (``model_weights``), and the
relative attention biases and relative key/value vectors rebuilt through a kind's registration
(``relative_bias``, ``relative_vectors``).

The lowest room: it imports no other room of the analysis (``tests/test_analysis_rooms.py``).
"""

# Each registers the rebuilds of its built-in kinds (``rebuilds``) as it is imported: the analysis
# finds them whichever of its modules it entered by.
from posenc.analysis.read import relative_bias, relative_vectors  # noqa: E402, F401
