import { describe, expect, it } from "vitest";
import { notAJob } from "../src/ranks-model";
import type { RanksDoc } from "../src/route_types";

// /ranks on a listed run that is not a job answers 200 with the reason (plugin/ranks_route.py; issue 47:
// the 404 it sent before was logged by the browser as an error); the view shows the reason, no summary.
const single: RanksDoc = {
  run: "single",
  not_a_job: "run 'single' is not a job of several ranks: fewer than two of its traces carry a rank "
    + "(kineto's distributedInfo, or a worker named like rank3)",
};

describe("notAJob", () => {
  it("reads the reason of a run that is not a job", () => {
    expect(notAJob(single)).toBe(single.not_a_job);
  });
  it("is null for a rank summary, and for an empty reason", () => {
    expect(notAJob({ run: "job", ranks: [], stages: [] })).toBeNull();
    expect(notAJob({ run: "x", not_a_job: "" })).toBeNull();
  });
});
