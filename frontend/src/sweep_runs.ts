// Runs that `tb-attn sweep --profile` recorded (SWEEP/profiles/<cell_id>, sweeps/runner.py): grouped under
// their sweep in the pickers and never opened, scaled or compared by default, so a user's own runs come first.

// cell_id is `{backend}-b{B}-L{L}-{8 hex}` (sweeps/grid.py Cell.cell_id).
const PROFILED_CELL = /^(?:(.*)\/)?profiles\/[^/]+-b\d+-L\d+-[0-9a-f]{8}$/;

/** The sweep a run was profiled by ("." for a sweep at the logdir's root), or null for the user's own runs. */
export function sweepOfRun(run: string): string | null {
  const m = PROFILED_CELL.exec(run);
  return m ? (m[1] ?? ".") : null;
}

/** Run names split into the user's own, in order, and the sweeps' cells, by sweep. */
export function splitSweepRuns(runs: string[]): { own: string[]; sweeps: [string, string[]][] } {
  const own: string[] = [];
  const bySweep = new Map<string, string[]>();
  for (const r of runs) {
    const s = sweepOfRun(r);
    if (s === null) own.push(r);
    else bySweep.set(s, [...(bySweep.get(s) || []), r]);
  }
  return { own, sweeps: [...bySweep.entries()].sort(([a], [b]) => a.localeCompare(b)) };
}
