"""A sweep's end (one report: its tables, W&B table and summary line) and the adaptive sweepers:
the seeds strategy (``seeds``) and the tune strategy (``tune``)."""
