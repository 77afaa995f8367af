"""The contracts below everything else: the tag format, user-facing errors, versions, the report's format and the route answers (imports nothing of ours)."""
