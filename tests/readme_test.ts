/**
 * The README's "API by example" block runs as written (imported from this checkout instead of
 * `@gyre/gyre`), on the default device: a user's first copy and paste must not throw.
 */
import assert from "node:assert/strict";

Deno.test("README: the API example runs as written", async () => {
  const readme = await Deno.readTextFile(new URL("../README.md", import.meta.url));
  const start = readme.indexOf("## The API by example");
  const open = readme.indexOf("```ts\n", start);
  const close = readme.indexOf("\n```", open + 6);
  assert.ok(start >= 0 && open > start && close > open, "the README has its API example block");
  const mod = new URL("../src/mod.ts", import.meta.url).href;
  const code = readme.slice(open + 6, close).replace(`"@gyre/gyre"`, JSON.stringify(mod));
  assert.ok(code.includes(mod), "the example imports gyre");
  const file = await Deno.makeTempFile({ suffix: ".ts" });
  try {
    await Deno.writeTextFile(file, code);
    const run = await new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", "--no-lock", "--no-check", file],
      stdout: "piped",
      stderr: "piped",
    }).output();
    const err = new TextDecoder().decode(run.stderr);
    assert.ok(run.success, `the example failed:\n${err}`);
  } finally {
    await Deno.remove(file);
  }
});
