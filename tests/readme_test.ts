/**
 * Every TypeScript block of README.md runs as written on every device this machine has: imported
 * from this checkout instead of `@gyre/gyre`, with the block's `init({ device: "auto" })` pointed at
 * the device under test. The shell block's tasks exist. A user's first copy and paste must not throw,
 * and an example cannot drift from the code.
 */
import assert from "node:assert/strict";
import { devices } from "./_devices.ts";

const readme = await Deno.readTextFile(new URL("../README.md", import.meta.url));
const mod = new URL("../src/mod.ts", import.meta.url).href;
const AUTO = `gyre.init({ device: "auto" })`;

/** The fenced blocks of one language, with the heading each stands under. */
function blocks(language: string): { heading: string; code: string }[] {
  const found: { heading: string; code: string }[] = [];
  let heading = "(top)";
  const lines = readme.split("\n");
  for (let i = 0; i < lines.length; i++) {
    if (lines[i].startsWith("#")) heading = lines[i].replace(/^#+\s*/, "");
    if (lines[i] !== "```" + language) continue;
    const end = lines.indexOf("```", i + 1);
    assert.ok(end > i, `the block under "${heading}" is closed`);
    found.push({ heading, code: lines.slice(i + 1, end).join("\n") });
    i = end;
  }
  return found;
}

async function runBlock(code: string): Promise<{ ok: boolean; stdout: string; stderr: string }> {
  const file = await Deno.makeTempFile({ suffix: ".ts" });
  try {
    await Deno.writeTextFile(file, code);
    const run = await new Deno.Command(Deno.execPath(), {
      // Type-checked too: an example that no longer type-checks has drifted as surely as one that
      // throws.
      args: ["run", "-A", "--no-lock", file],
      stdout: "piped",
      stderr: "piped",
    }).output();
    const decode = (b: Uint8Array) => new TextDecoder().decode(b);
    return { ok: run.success, stdout: decode(run.stdout), stderr: decode(run.stderr) };
  } finally {
    await Deno.remove(file);
  }
}

const tsBlocks = blocks("ts");
const deviceNames = await devices();

Deno.test("README: has the blocks this test runs, each self-contained", () => {
  assert.ok(tsBlocks.length >= 2, `found ${tsBlocks.length} TypeScript blocks`);
  for (const { heading, code } of tsBlocks) {
    assert.ok(code.includes(`from "@gyre/gyre"`), `the block under "${heading}" imports gyre`);
    assert.ok(code.includes(AUTO), `the block under "${heading}" calls ${AUTO}`);
  }
});

for (const [index, { heading, code }] of tsBlocks.entries()) {
  for (const device of deviceNames) {
    Deno.test(`README: block ${index + 1} ("${heading}") runs on ${device}`, async () => {
      const source = code.replace(`"@gyre/gyre"`, JSON.stringify(mod))
        .replace(AUTO, `gyre.init({ device: "${device}" })`);
      const run = await runBlock(source);
      assert.ok(run.ok, `the block failed on ${device}:\n${run.stderr}`);
      // A comment `// prints "X"` is a promise about the output on the GPU (WASM runs each
      // primitive as its own kernel, so its listing differs).
      for (const [, printed] of code.matchAll(/\/\/ prints "([^"]+)"/g)) {
        if (device === "gpu") {
          assert.ok(run.stdout.includes(printed), `prints ${printed}:\n${run.stdout}`);
        }
      }
    });
  }
}

Deno.test("README: the shell block's commands are this project's tasks", async () => {
  const config = JSON.parse(await Deno.readTextFile(new URL("../deno.json", import.meta.url)));
  const commands = blocks("sh").flatMap((b) => b.code.split("\n")).filter((l) => l.trim());
  assert.ok(commands.length >= 2);
  for (const line of commands) {
    const task = line.match(/^deno task (\w+)/)?.[1];
    assert.ok(task && task in config.tasks, `"${line}" names a task of deno.json`);
  }
});
