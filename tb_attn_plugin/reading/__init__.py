"""Reading: each attention call read the way the post reads one (expected against actual kernels, host cost, fingerprints, occupancy, why not flash)."""
