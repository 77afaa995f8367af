// Fetching the backend's JSON. URLs are relative: TensorBoard serves the plugin's iframe with
// <base href="plugin/tb_attn/">, so "./runs" is /data/plugin/tb_attn/runs wherever TensorBoard is
// mounted (a --path_prefix included).

import type { CallAnswer, CompareDoc, MemoryDoc, RanksDoc, RunsDoc, SweepDoc, SweepsDoc } from "./route_types";
import type { Kernel, Report } from "./types";

export class ApiError extends Error {
  constructor(message: string, readonly status: number) {
    super(message);
  }
}

/** The answer while the backend is still analysing a trace (HTTP 202). */
export interface Loading {
  loading: true;
  phase?: string;
  waitingFor?: string[];
}

function query(params: Record<string, string | string[] | null | undefined>): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v === null || v === undefined) continue;
    for (const one of Array.isArray(v) ? v : [v]) q.append(k, one);
  }
  const s = q.toString();
  return s ? "?" + s : "";
}

async function getJSON<T>(path: string): Promise<T | Loading> {
  let resp: Response;
  try {
    resp = await fetch(path, { headers: { Accept: "application/json" }, credentials: "same-origin" });
  } catch (e) {
    throw new ApiError(`cannot reach TensorBoard (${(e as Error).message || "network error"})`, 0);
  }
  let body: unknown = null;
  const text = await resp.text();
  try {
    body = text ? JSON.parse(text) : null;
  } catch {
    throw new ApiError(`the Attention plugin answered ${resp.status} with something that is not JSON`, resp.status);
  }
  const obj = (body && typeof body === "object" ? body : {}) as Record<string, unknown>;
  if (resp.status === 202) {
    return {
      loading: true,
      phase: typeof obj.phase === "string" ? obj.phase : undefined,
      waitingFor: Array.isArray(obj.waiting_for) ? (obj.waiting_for as string[]) : undefined,
    };
  }
  if (!resp.ok) {
    const msg = typeof obj.error === "string" ? obj.error : `HTTP ${resp.status} ${resp.statusText}`;
    throw new ApiError(msg, resp.status);
  }
  return body as T;
}

export function isLoading(v: unknown): v is Loading {
  return !!v && typeof v === "object" && (v as Loading).loading === true;
}

export interface Target {
  run: string;
  worker?: string | null;
  span?: string | null;
}

export const api = {
  runs: () => getJSON<RunsDoc>("./runs"),
  report: (t: Target) => getJSON<Report>("./report" + query({ run: t.run, worker: t.worker, span: t.span })),
  kernels: (t: Target, stage?: string, pass?: string) =>
    getJSON<{ kernels: Kernel[] }>("./kernels" + query({ run: t.run, worker: t.worker, span: t.span, stage, pass })),
  call: (t: Target, id: number) =>
    getJSON<CallAnswer>("./call" + query({ run: t.run, worker: t.worker, span: t.span, id: String(id) })),
  compare: (runs: string[]) => getJSON<CompareDoc>("./compare" + query({ run: runs })),
  ranks: (run: string) => getJSON<RanksDoc>("./ranks" + query({ run })),
  /** Workers of one run against each other (ranks of a job): /compare?run=R&worker=A&run=R&worker=B. */
  compareWorkers: (run: string, workers: string[]) =>
    getJSON<CompareDoc>("./compare" + query({ run: workers.map(() => run), worker: workers })),
  memory: (t: Target, points: number) =>
    getJSON<MemoryDoc>("./memory" + query({ run: t.run, worker: t.worker, span: t.span, points: String(points) })),
  sweeps: () => getJSON<SweepsDoc>("./sweeps"),
  sweep: (run: string) => getJSON<SweepDoc>("./sweep" + query({ run })),
};

/**
 * Ask until the answer is ready: 202 means the backend is analysing; ``onWait`` is told each time.
 * ``alive`` lets the caller stop polling when the user has moved on.
 */
export async function untilReady<T>(
  ask: () => Promise<T | Loading>, onWait: (l: Loading) => void, alive: () => boolean, intervalMs = 700,
): Promise<T | null> {
  for (;;) {
    const r = await ask();
    if (!alive()) return null;
    if (!isLoading(r)) return r;
    onWait(r);
    await new Promise((res) => setTimeout(res, intervalMs));
    if (!alive()) return null;
  }
}
