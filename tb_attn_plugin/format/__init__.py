"""The contracts below everything else: the tag format, user-facing errors and versions (imports nothing of ours)."""
