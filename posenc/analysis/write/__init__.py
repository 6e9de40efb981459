"""Writing: the files each ``posenc-pe`` command leaves in ``--out`` (``outputs``), as JSON
(``report_files``), text (``report_text``, ``bases_text``, ``sweep_text``, with ``format`` spelling
numbers and tables) and figures (``figures``, drawn by ``plots``).

The top room below the command line: it may import measuring and reading, and nothing imports it
but ``posenc.analysis.cli`` (``tests/test_analysis_rooms.py``).
"""
