"""Running one cell: its lifecycle, the fairseq steps as child processes, resuming, the per-cell
lock, signals, and the record it writes."""
