"""Report: one trace's analysis assembled into the versioned report (build), its text and verdicts, and runs compared."""
