"""A sweep's end (one report read from the sweep directory: its tables, W&B table and summary line)
and the seeds strategy's sweeper."""
