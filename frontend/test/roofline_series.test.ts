import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { BOUND_COLOR, runColors } from "../src/colors";
import { pointSeries, rooflineChart } from "../src/roofline_model";
import type { Report } from "../src/types";

// Real reports (fixtures/README.md): OWLv2 eager and BERT SDPA flash on an H100.
const fixture = <T>(name: string): T => JSON.parse(readFileSync(new URL(`./fixtures/${name}.json`, import.meta.url), "utf8"));
const owl = fixture<Report>("roofline_owlv2");
const bert = fixture<Report>("roofline_bert_flash");

describe("the roofline's series colours (issue 47: the shared roofline drew every run in one blue)", () => {
  it("one run: each point coloured by its bound, as the legend names it", () => {
    const s = pointSeries(rooflineChart([{ run: "owl", report: owl }]));
    expect(s.map((x) => x.name).sort()).toEqual(["launch-bound", "memory-bound"]);
    for (const x of s) expect(x.color).toBe(BOUND_COLOR[x.bound]);
  });

  it("two runs bound alike: two colours, the runs' own (the Compare page's), the bound in the marker", () => {
    // the same report under two names: every point of both runs has the same bounds
    const m = rooflineChart([{ run: "quiet", report: bert }, { run: "loaded", report: bert }]);
    const s = pointSeries(m, ["quiet", "loaded"]);
    const colors = runColors(["quiet", "loaded"]);
    expect(new Set(s.map((x) => x.color)).size).toBe(2);
    for (const x of s) {
      expect(x.color).toBe(colors.get(x.run));
      expect(x.name).toBe(`${x.run}: ${x.bound}-bound`);
    }
    const symbols = new Map(s.map((x) => [x.bound, x.symbol]));
    for (const x of s) expect(x.symbol).toBe(symbols.get(x.bound)); // one marker per bound, whichever run
  });

  it("runs keep the page's colours whichever of them has points", () => {
    const m = rooflineChart([{ run: "owl", report: owl }, { run: "bert", report: bert }]);
    const s = pointSeries(m, ["first-without-points", "owl", "bert"]);
    const colors = runColors(["first-without-points", "owl", "bert"]);
    expect(s.filter((x) => x.run === "bert").every((x) => x.color === colors.get("bert"))).toBe(true);
    expect(s.filter((x) => x.run === "owl").every((x) => x.color === colors.get("owl"))).toBe(true);
    expect(s.reduce((n, x) => n + x.points.length, 0)).toBe(m.points.length);
  });
});
