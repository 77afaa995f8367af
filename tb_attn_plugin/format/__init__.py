"""The contracts below everything else: the tag format, user-facing errors, versions and the report's format (imports nothing of ours)."""
