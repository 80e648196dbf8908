/**
 * Every registered GPU kernel (`tuning.KERNELS` minus `tuning.INTERNAL_KERNELS`, which are tested
 * through the ops that use them) must have a property test against its WASM reference.
 *
 * The check is static: property tests declare the kernel ids they cover as the first argument of
 * `property(...)` (tests/_harness.ts) or of a `...Property(...)` wrapper, written as a string
 * literal or an array of string literals. This test reads tests/property_*_test.ts, drops
 * comments, and collects those literals; a call whose first argument is not a literal covers
 * nothing. A kernel added to the registry without such a test fails here.
 *
 * Variants likewise: every variant a registered GPU kernel's family names (`FAMILY_VARIANTS`,
 * built from the plans' choice types) must appear in the `variants: [...]` option of some
 * property, and the harness (tests/_harness.ts) fails that property unless the GPU reported
 * running each variant it declares. Declared here, run there: together, every variant ran.
 * @module
 */
import assert from "node:assert/strict";
import * as tuning from "../src/tuning.ts";

const STRING = String.raw`"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'`;

/** Source text with comments blanked out (string and template literals kept intact). */
export function stripComments(source: string): string {
  const token =
    /("(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'|`(?:[^`\\]|\\.)*`)|(\/\/[^\n]*|\/\*[\s\S]*?\*\/)/g;
  return source.replace(token, (m, str) => (str ? m : m.replace(/[^\n]/g, " ")));
}

/** Kernel ids declared by `property(...)`/`xxxProperty(...)` calls in `source`. */
export function declaredKernels(source: string): Set<string> {
  const code = stripComments(source);
  const ids = new Set<string>();
  const call = new RegExp(
    String
      .raw`(?<!function\s+)\b(?:property|[a-z]\w*Property)\(\s*(${STRING}|\[\s*(?:(?:${STRING})\s*,?\s*)*\])`,
    "g",
  );
  for (const m of code.matchAll(call)) {
    for (const lit of m[1].matchAll(new RegExp(STRING, "g"))) ids.add(lit[0].slice(1, -1));
  }
  return ids;
}

/** "family/variant" strings declared in `variants: [...]` options in `source`. */
export function declaredVariants(source: string): Set<string> {
  const code = stripComments(source);
  const ids = new Set<string>();
  const option = new RegExp(String.raw`\bvariants:\s*(\[\s*(?:(?:${STRING})\s*,?\s*)*\])`, "g");
  for (const m of code.matchAll(option)) {
    for (const lit of m[1].matchAll(new RegExp(STRING, "g"))) ids.add(lit[0].slice(1, -1));
  }
  return ids;
}

/** Required variants that `sources` do not declare. */
export function undeclared(required: Iterable<string>, sources: readonly string[]): string[] {
  const declared = new Set<string>();
  for (const s of sources) for (const v of declaredVariants(s)) declared.add(v);
  return [...new Set(required)].filter((v) => !declared.has(v)).sort();
}

/** Required kernels that `sources` do not cover. */
export function uncovered(required: Iterable<string>, sources: readonly string[]): string[] {
  const covered = new Set<string>();
  for (const s of sources) for (const id of declaredKernels(s)) covered.add(id);
  return [...required].filter((id) => !covered.has(id)).sort();
}

async function propertySources(): Promise<{ name: string; text: string }[]> {
  const dir = new URL("./", import.meta.url);
  const files: { name: string; text: string }[] = [];
  for await (const entry of Deno.readDir(dir)) {
    if (entry.isFile && /^property_.*_test\.ts$/.test(entry.name)) {
      files.push({ name: entry.name, text: await Deno.readTextFile(new URL(entry.name, dir)) });
    }
  }
  return files;
}

const required = tuning.KERNELS.map((k) => k.id).filter((id) => !tuning.INTERNAL_KERNELS.has(id));

Deno.test("every registered GPU kernel has a property test", async () => {
  const files = await propertySources();
  assert.ok(files.length >= 3, `found only ${files.map((f) => f.name)}`);
  const missing = uncovered(required, files.map((f) => f.text));
  assert.deepEqual(
    missing,
    [],
    `kernels without a property test (declare them in a property(...) call of tests/property_*_test.ts): ${
      missing.join(", ")
    }`,
  );
});

Deno.test("property tests name only registered kernels", async () => {
  const known = new Set(tuning.KERNELS.map((k) => k.id));
  const declared = new Set<string>();
  for (const f of await propertySources()) {
    for (const id of declaredKernels(f.text)) declared.add(id);
  }
  assert.deepEqual([...declared].filter((id) => !known.has(id)).sort(), []);
  // Internal kernels stay out of the requirement, but nothing else does.
  assert.equal(required.length + tuning.INTERNAL_KERNELS.size, tuning.KERNELS.length);
  for (const id of tuning.INTERNAL_KERNELS) {
    assert.ok(known.has(id), `internal kernel ${id} is not registered`);
  }
});

Deno.test("the coverage check fails for a kernel added without a test", async () => {
  const texts = (await propertySources()).map((f) => f.text);
  assert.deepEqual(
    uncovered([...required, "elementwise/brandNew"], texts),
    [...uncovered(required, texts), "elementwise/brandNew"].sort(),
  );
  // A commented-out declaration, a non-literal argument or a definition covers nothing.
  const fake = [
    `// property("reduce/brandNew", "x", arb, check);`,
    `/* elementwiseProperty("reduce/brandNew"); */`,
    `property(id, "x", arb, check);`,
    `function fooProperty("reduce/brandNew") {}`,
    `property(["reduce/other", "elementwise/inArray"], "x", arb, check);`,
    `elementwiseProperty("elementwise/wrapped");`,
  ].join("\n");
  assert.deepEqual(uncovered(["reduce/brandNew"], [fake]), ["reduce/brandNew"]);
  assert.deepEqual(uncovered(["elementwise/inArray", "elementwise/wrapped"], [fake]), []);
});

const requiredVariants = tuning.KERNELS.filter((k) => !tuning.INTERNAL_KERNELS.has(k.id)).flatMap((
  k,
) => k.gpu.variants.map((v) => `${k.gpu.family}/${v}`));

Deno.test("every variant of every registered GPU kernel is declared by a property test", async () => {
  const texts = (await propertySources()).map((f) => f.text);
  const missing = undeclared(requiredVariants, texts);
  assert.deepEqual(
    missing,
    [],
    `variants no property declares (add them to a property's variants: [...] option, which ` +
      `makes the property fail unless the GPU ran them): ${missing.join(", ")}`,
  );
});

Deno.test("property tests declare only variants the plans name", async () => {
  const known = new Set(
    Object.entries(tuning.FAMILY_VARIANTS).flatMap(([f, vs]) => vs.map((v) => `${f}/${v}`)),
  );
  const declared = new Set<string>();
  for (const f of await propertySources()) {
    for (const v of declaredVariants(f.text)) declared.add(v);
  }
  assert.ok(declared.size > 0);
  assert.deepEqual([...declared].filter((v) => !known.has(v)).sort(), []);
});

Deno.test("the variant check fails for a variant no property declares", () => {
  const fake = [
    `property("reduce/sum", "x", arb, check, { variants: ["reduce/thread"] });`,
    `// { variants: ["reduce/workgroup-shared"] }`,
  ].join("\n");
  assert.deepEqual(undeclared(["reduce/thread", "reduce/workgroup-shared"], [fake]), [
    "reduce/workgroup-shared",
  ]);
});
