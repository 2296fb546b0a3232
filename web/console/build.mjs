// Builds the console into dist/ (committed; embedded by the server with
// include_bytes!). `--tests` bundles the unit tests into build/tests/ for
// `node --test` instead (build/ is not committed).
import { build } from "esbuild";
import { copyFileSync, mkdirSync, rmSync } from "node:fs";

if (process.argv.includes("--tests")) {
  rmSync("build", { recursive: true, force: true });
  await build({
    entryPoints: ["src/proto.test.ts", "src/view.test.ts"],
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node20",
    outdir: "build/tests",
    outExtension: { ".js": ".mjs" },
    logLevel: "warning",
  });
} else {
  mkdirSync("dist", { recursive: true });
  await build({
    entryPoints: ["src/main.ts"],
    bundle: true,
    format: "iife",
    target: "es2020",
    outfile: "dist/console.js",
    legalComments: "none",
    logLevel: "warning",
  });
  copyFileSync("src/index.html", "dist/index.html");
  copyFileSync("src/console.css", "dist/console.css");
}
