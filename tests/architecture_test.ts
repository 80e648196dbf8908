/**
 * The layers of src/ (README, "Layout"), checked on the module graph `deno info` reports:
 * - no module of the front end (src/ops/, src/tensor.ts, the creation functions, jit, tidy,
 *   explain, random) imports a device module (src/gpu/, src/wasm/): ops build jobs, devices run
 *   them, and only src/runtime.ts, which makes the devices, and src/tune.ts, the tuner, which
 *   times them with the GPU profiler, name them;
 * - the layers below import nothing above them: core imports only core; ir only core and ir;
 *   plans only core, ir and plans; heuristics (the chooser: rules, tables, consensus) only core,
 *   plans and heuristics; contract only core, ir, plans and contract;
 * - no import circle exists among source files. One kind of edge is left out: the type-only
 *   imports of src/tensor.ts, whose method signatures name the ops' option types while the ops
 *   construct tensors (type-only imports are erased; the methods reach the ops through the table
 *   src/ops/mod.ts installs, never through an import).
 * @module
 */
import assert from "node:assert/strict";

interface Edge {
  from: string;
  to: string;
  typeOnly: boolean;
}

const root = new URL("../", import.meta.url);

async function graph(entries: string[]): Promise<Edge[]> {
  const edges: Edge[] = [];
  for (const entry of entries) {
    const out = await new Deno.Command(Deno.execPath(), {
      args: ["info", "--json", entry],
      cwd: root,
      stdout: "piped",
      stderr: "piped",
    }).output();
    assert.ok(out.success, new TextDecoder().decode(out.stderr));
    const info = JSON.parse(new TextDecoder().decode(out.stdout)) as {
      modules: {
        specifier: string;
        dependencies?: { code?: { specifier: string }; type?: { specifier: string } }[];
      }[];
    };
    for (const m of info.modules) {
      if (!m.specifier.startsWith(root.href + "src/")) continue;
      const from = m.specifier.slice(root.href.length);
      for (const d of m.dependencies ?? []) {
        const target = d.code?.specifier ?? d.type?.specifier;
        if (!target?.startsWith(root.href + "src/")) continue;
        edges.push({ from, to: target.slice(root.href.length), typeOnly: !d.code });
      }
    }
  }
  return edges;
}

const edges = await graph([
  "src/mod.ts",
  "src/tuning.ts",
  "src/gpu/profiler.ts",
  "src/core/mod.ts",
  "src/ir/mod.ts",
  "src/contract/mod.ts",
]);

const layer = (file: string): string => {
  const m = file.match(/^src\/(core|ir|plans|heuristics|contract|gpu|wasm|ops)\//);
  if (m) return m[1];
  // The version is a constant of no imports: as low as core.
  if (file === "src/version.ts") return "core";
  return file === "src/runtime.ts" || file === "src/tune.ts" ? "runtime" : "front";
};

/** Strongly connected components with more than one module (Tarjan). */
export function circles(list: readonly Edge[]): string[][] {
  const next = new Map<string, string[]>();
  for (const e of list) next.set(e.from, [...(next.get(e.from) ?? []), e.to]);
  let counter = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (v: string) => {
    index.set(v, counter);
    low.set(v, counter++);
    stack.push(v);
    onStack.add(v);
    for (const w of next.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) === index.get(v)) {
      const component: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        onStack.delete(w);
        component.push(w);
      } while (w !== v);
      if (component.length > 1) found.push(component.sort());
    }
  };
  for (const v of next.keys()) if (!index.has(v)) visit(v);
  return found;
}

Deno.test("architecture: the graph covers the library", () => {
  const files = new Set(edges.flatMap((e) => [e.from, e.to]));
  for (const dir of ["core", "ir", "plans", "heuristics", "contract", "gpu", "wasm", "ops"]) {
    assert.ok([...files].some((f) => f.startsWith(`src/${dir}/`)), `no module of src/${dir}/`);
  }
});

Deno.test("architecture: no front-end module imports a device module", () => {
  const bad = edges.filter((e) =>
    ["front", "ops"].includes(layer(e.from)) && ["gpu", "wasm"].includes(layer(e.to))
  );
  assert.deepEqual(bad.map((e) => `${e.from} -> ${e.to}`), []);
});

Deno.test("architecture: lower layers import nothing above them", () => {
  const allowed: Record<string, string[]> = {
    core: ["core"],
    ir: ["core", "ir"],
    plans: ["core", "ir", "plans"],
    heuristics: ["core", "plans", "heuristics"],
    contract: ["core", "ir", "plans", "contract"],
  };
  const bad = edges.filter((e) =>
    allowed[layer(e.from)] && !allowed[layer(e.from)].includes(layer(e.to))
  );
  assert.deepEqual(bad.map((e) => `${e.from} -> ${e.to}`), []);
});

Deno.test("architecture: no import circle among source files", () => {
  const counted = edges.filter((e) => !(e.from === "src/tensor.ts" && e.typeOnly));
  assert.deepEqual(circles(counted), []);
});

Deno.test("architecture: the checks find a circle and a front-end import of a device", () => {
  // A test that cannot fail is a bug: the same checks on a graph with the old mistakes.
  const old: Edge[] = [
    { from: "src/plans.ts", to: "src/gpu/_codegen_matmul.ts", typeOnly: false },
    { from: "src/gpu/_codegen_matmul.ts", to: "src/plans.ts", typeOnly: true },
    { from: "src/tensor.ts", to: "src/ops/rows.ts", typeOnly: true },
    { from: "src/ops/rows.ts", to: "src/tensor.ts", typeOnly: false },
  ];
  assert.deepEqual(circles(old), [
    ["src/gpu/_codegen_matmul.ts", "src/plans.ts"],
    ["src/ops/rows.ts", "src/tensor.ts"],
  ]);
  assert.equal(layer("src/ops/rows.ts"), "ops");
  assert.equal(layer("src/gpu/rows.ts"), "gpu");
});
