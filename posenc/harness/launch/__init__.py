"""Where cells run: side by side on one machine (joblib, submitit_local) and on SLURM."""
