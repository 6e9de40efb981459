"""What a user watches while cells run: progress lines and W&B runs."""
