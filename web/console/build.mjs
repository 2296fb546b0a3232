// Builds the console into dist/ (committed; embedded by the server with
// include_bytes!). `--tests` bundles the unit tests into build/tests/ for
// `node --test` instead (build/ is not committed).
import { build } from "esbuild";
import { createHash } from "node:crypto";
import { copyFileSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";

// What dist/ is built from. dist/SOURCES.sha256 records their hash, and the
// server's unit test `the_built_console_matches_its_sources` recomputes it
// (same rule: each file as "<path>\0<length>\0<bytes>", sorted by path),
// so a source change committed without a rebuild fails `cargo test`.
function sourceHash() {
  const files = [
    "build.mjs",
    "package.json",
    "package-lock.json",
    "tsconfig.json",
    ...readdirSync("src").map((f) => `src/${f}`),
  ].sort();
  const hash = createHash("sha256");
  for (const f of files) {
    const bytes = readFileSync(f);
    hash.update(`${f}\0${bytes.length}\0`);
    hash.update(bytes);
  }
  return hash.digest("hex");
}

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
  writeFileSync("dist/SOURCES.sha256", `${sourceHash()}\n`);
}
