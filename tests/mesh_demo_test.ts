/**
 * `deno task mesh` (scripts/mesh.ts) runs as a user runs it, on small meshes: a row per size and
 * device, a lower cost at the end than at the start on every row, the crossover line and a
 * chart. (The full sizes run on the GPU hosts: bench/results/mesh-*.md.)
 */
import assert from "node:assert/strict";
import { devices } from "./_devices.ts";

const DEVICES = await devices();

Deno.test("deno task mesh: small meshes restored on every device, with a table and a chart", async () => {
  const svg = await Deno.makeTempFile({ suffix: ".svg" });
  try {
    const wanted = DEVICES.includes("gpu") ? "gpu,cpu" : "cpu";
    const out = await new Deno.Command(Deno.execPath(), {
      args: [
        "run",
        "-A",
        new URL("../scripts/mesh.ts", import.meta.url).pathname,
        "--devices",
        wanted,
        "--max-vertices",
        "162",
        "--iterations",
        "10",
        "--svg",
        svg,
      ],
      stdout: "piped",
      stderr: "piped",
    }).output();
    const text = new TextDecoder().decode(out.stdout);
    assert.equal(out.code, 0, text + new TextDecoder().decode(out.stderr));
    const rows = text.split("\n").filter((l) => /^\| [\d,]+ \|/.test(l));
    assert.equal(rows.length, 3 * wanted.split(",").length, text);
    for (const row of rows) {
      const cells = row.split("|").map((c) => c.trim());
      const [start, end] = [Number(cells[11]), Number(cells[12])];
      assert.ok(end < start, `cost did not fall: ${row}`);
    }
    if (wanted === "gpu,cpu") assert.match(text, /Crossover: /);
    assert.match(await Deno.readTextFile(svg), /<polyline/);
  } finally {
    await Deno.remove(svg);
  }
});
