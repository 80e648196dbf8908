/// <reference lib="deno.window" />
// Bundle the peer benchmarks (bench/peers/tfjs.ts, bench/peers/jax.ts) into
// self-contained ES modules that run under Deno with no node_modules and no
// network:
//
//   deno run -A scripts/bundle_peers.ts [outdir]    # default bench/peers/dist
//   deno run -A <outdir>/tfjs.js --scale small
//   deno run -A <outdir>/jax.js --scale small
//
// Needs npm only when bench/peers/node_modules is missing (then it runs
// `npm ci` against the pinned bench/peers/package-lock.json). esbuild is
// loaded from bench/peers/node_modules, where it is pinned to 0.28.2 together
// with its native @esbuild/<platform> binary, so Deno's own npm cache and
// resolution are not involved.

import { createRequire } from "node:module";
import * as path from "node:path";
import { fileURLToPath } from "node:url";

const ESBUILD_VERSION = "0.28.2";

const repoRoot = path.resolve(
  path.dirname(fileURLToPath(import.meta.url)),
  "..",
);
const peersDir = path.join(repoRoot, "bench", "peers");
const outDir = path.resolve(Deno.args[0] ?? path.join(peersDir, "dist"));

async function exists(p: string): Promise<boolean> {
  try {
    await Deno.stat(p);
    return true;
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return false;
    throw e;
  }
}

async function ensureNodeModules(): Promise<void> {
  const marker = path.join(peersDir, "node_modules", ".package-lock.json");
  if (await exists(marker)) return;
  console.error(`[bundle] node_modules missing: npm ci in ${peersDir}`);
  const { success, code } = await new Deno.Command("npm", {
    args: ["ci", "--no-audit", "--no-fund"],
    cwd: peersDir,
    stdout: "inherit",
    stderr: "inherit",
  }).output();
  if (!success) throw new Error(`npm ci failed with exit code ${code}`);
}

interface BuildResult {
  errors: unknown[];
  warnings: unknown[];
}
interface ResolveArgs {
  path: string;
  kind: string;
  resolveDir: string;
}
interface PluginBuild {
  onResolve(
    options: { filter: RegExp },
    callback: (args: ResolveArgs) => Promise<unknown>,
  ): void;
  resolve(
    path: string,
    options: { kind: string; resolveDir: string },
  ): Promise<{ path: string; errors: { text: string }[] }>;
}
interface Esbuild {
  version: string;
  build(options: Record<string, unknown>): Promise<BuildResult>;
  stop(): void | Promise<void>;
}

/**
 * The entries import `npm:<name>@<version>[/subpath]` so they stay valid Deno
 * programs. Map those onto bench/peers/node_modules, refusing a version that
 * differs from the installed (lockfile-pinned) one.
 */
const npmSpecifiers = {
  name: "npm-specifiers",
  setup(build: PluginBuild) {
    build.onResolve({ filter: /^npm:/ }, async (args) => {
      const m = /^npm:((?:@[^/@]+\/)?[^/@]+)@([^/]+)(\/.*)?$/.exec(args.path);
      if (!m) return { errors: [{ text: `unpinned npm specifier ${args.path}` }] };
      const [, name, version, subpath = ""] = m;
      const pkgJson = path.join(peersDir, "node_modules", name, "package.json");
      const installed = (JSON.parse(await Deno.readTextFile(pkgJson)) as {
        version: string;
      }).version;
      if (installed !== version) {
        return {
          errors: [{
            text: `${args.path}: bench/peers/node_modules has ${name}@${installed}`,
          }],
        };
      }
      const r = await build.resolve(name + subpath, {
        kind: args.kind,
        resolveDir: peersDir,
      });
      if (r.errors.length > 0) return { errors: r.errors };
      return { path: r.path };
    });
  },
};

async function main(): Promise<void> {
  await ensureNodeModules();
  // esbuild's JS API is CommonJS and finds its native binary through
  // require.resolve("@esbuild/<platform>"), so load it with a require rooted
  // in bench/peers.
  const require = createRequire(path.join(peersDir, "package.json"));
  const esbuild = require("esbuild") as Esbuild;
  if (esbuild.version !== ESBUILD_VERSION) {
    throw new Error(
      `esbuild ${esbuild.version} in bench/peers/node_modules, expected ${ESBUILD_VERSION}: run npm ci in bench/peers`,
    );
  }
  // jax-js exports no version string; bake the installed one into jax.js.
  const jaxPkg = JSON.parse(
    await Deno.readTextFile(
      path.join(peersDir, "node_modules", "@jax-js", "jax", "package.json"),
    ),
  ) as { version: string };
  await Deno.mkdir(outDir, { recursive: true });
  try {
    for (const [entry, out] of [["tfjs.ts", "tfjs.js"], ["jax.ts", "jax.js"]]) {
      const outfile = path.join(outDir, out);
      const result = await esbuild.build({
        absWorkingDir: peersDir,
        entryPoints: [path.join(peersDir, entry)],
        outfile,
        bundle: true, // inline every dependency
        plugins: [npmSpecifiers],
        format: "esm",
        // "browser" makes esbuild honour package.json "browser" fields, which
        // map tfjs-core's Node-only requires (node-fetch, util, crypto,
        // worker_threads) to empty modules; Deno provides the web APIs.
        platform: "browser",
        mainFields: ["module", "browser", "main"],
        conditions: ["import", "module", "browser", "default"],
        target: "es2022",
        minify: false,
        sourcemap: false,
        legalComments: "inline",
        define: { JAX_JS_VERSION: JSON.stringify(jaxPkg.version) },
        logLevel: "warning",
        banner: {
          js:
            `// Bundled by scripts/bundle_peers.ts (esbuild ${ESBUILD_VERSION}) from bench/peers/${entry}. Do not edit.`,
        },
      });
      if (result.errors.length > 0) {
        throw new Error(`esbuild errors in ${entry}`);
      }
      const bytes = (await Deno.stat(outfile)).size;
      console.error(
        `[bundle] ${path.relative(repoRoot, outfile) || outfile}: ${bytes} bytes`,
      );
      console.log(`${outfile}\t${bytes}`);
    }
  } finally {
    await esbuild.stop();
  }
}

await main();
