// Builds src/index.ts into ../tb_attn_plugin/static/index.js: one ES module, minified, no source
// map, no timestamps, so the same source and package-lock.json always give the same bytes.
// Usage: node build.mjs [--out FILE]
import { build } from "esbuild";
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const i = process.argv.indexOf("--out");
const outfile = i > 0 ? resolve(process.argv[i + 1]) : resolve(here, "../tb_attn_plugin/static/index.js");

await build({
  absWorkingDir: here,
  entryPoints: ["src/index.ts"],
  outfile,
  bundle: true,
  format: "esm",
  platform: "browser",
  target: ["es2020", "chrome100", "firefox100", "safari15"],
  minify: true,
  sourcemap: false,
  legalComments: "eof",
  charset: "utf8",
  treeShaking: true,
  logLevel: "warning",
  banner: { js: "// tb-attn Attention tab. Built from frontend/src by frontend/build.mjs (npm run build); do not edit by hand." },
});
console.log(`built ${outfile}`);
