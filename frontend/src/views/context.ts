import type { Report } from "../types";
import type { RunsDoc } from "../route_types";
import type { State } from "../state";

export interface Target {
  run: string;
  worker: string | null;
  span: string | null;
}

/** What every view gets: the state, a way to change it, the runs and the current run's report. */
export interface Ctx {
  state: State;
  /** Change the state (and the URL); the view is drawn again unless ``redraw`` is false. */
  set(patch: Partial<State>, redraw?: boolean): void;
  runs: RunsDoc;
  target: Target | null;
  /** The report of ``t`` (the current target by default), showing loading and error states in ``into``. */
  report(into: HTMLElement, t?: Target): Promise<Report | null>;
  alive(): boolean;
}
