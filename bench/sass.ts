/**
 * What NVIDIA's Vulkan driver made of gyre's kernels: runs one gyre expression in a child process
 * whose shader cache starts empty, takes the machine code the driver cached for every kernel it
 * compiled, disassembles it with the CUDA toolkit's `nvdisasm`, and prints per kernel its
 * instructions, registers per invocation, spills, memory operations and barriers.
 *
 * Why: WGSL gives no control over registers, and the driver holds a kernel to the registers that
 * keep its occupancy (64 per invocation for workgroups of 512 on an H200), moving the rest to
 * workgroup memory through R1 or to local memory (`STL`/`LDL`). Timings alone cannot tell a
 * design limit from a spill.
 *
 * Needs an NVIDIA GPU, `nvdisasm` (on PATH or in /usr/local/cuda/bin) and the driver's cache in
 * its usual format (zstd frames; the code of a kernel follows a header whose length is at byte
 * 0x30). Machines without them get a clear error.
 *
 * Usage:
 *   deno run -A bench/sass.ts --op "gyre.cumsum(gyre.random.uniform([1 << 26]))" \
 *     [--override 'scan={"workgroupSize":256}'] [--out DIR]
 * `--op` is an expression over `gyre` (src/mod.ts) whose value is a tensor (constants such as
 * `gyre.ones` may fold away and compile nothing); `--override KIND=JSON`
 * (repeatable) is passed to `setPlanOverride` (`@gyre/gyre/tuning`); `--out` keeps each disassembly.
 * @module
 */
import { frames, machineCode, summarize } from "./_sass_parse.ts";

const args = Deno.args;
const flag = (name: string): string | undefined => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? args[i + 1] : undefined;
};
const flags = (name: string): string[] =>
  args.flatMap((a, i) => (a === `--${name}` && i + 1 < args.length ? [args[i + 1]] : []));

if (args.includes("--child")) {
  // The child: compiles (and runs) the kernels of one expression.
  const gyre = await import("../src/mod.ts");
  const tuning = await import("../src/tuning.ts");
  await gyre.init({ device: "gpu" });
  for (const o of flags("override")) {
    const at = o.indexOf("=");
    tuning.setPlanOverride(
      o.slice(0, at) as Parameters<typeof tuning.setPlanOverride>[0],
      JSON.parse(o.slice(at + 1)),
    );
  }
  const run = new Function("gyre", `return (${flag("op")});`) as (g: typeof gyre) => {
    data(): Promise<unknown>;
  };
  await run(gyre).data();
  // Ends without Deno.exit: the driver writes its cache when the device is destroyed at unload.
}

function nvdisasm(): string {
  for (const path of ["nvdisasm", "/usr/local/cuda/bin/nvdisasm"]) {
    try {
      new Deno.Command(path, { args: ["--version"], stdout: "null", stderr: "null" }).outputSync();
      return path;
    } catch { /* try the next */ }
  }
  throw new Error("sass: nvdisasm not found (install the CUDA toolkit or put it on PATH)");
}

if (!args.includes("--child")) {
  const op = flag("op");
  if (!op) throw new Error("sass: --op EXPRESSION is required (see the module doc)");
  const out = flag("out");
  const disassembler = nvdisasm();
  const cache = await Deno.makeTempDir({ prefix: "gyre-sass-" });
  const child = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "--no-lock", new URL(import.meta.url).pathname, "--child", ...args],
    env: { XDG_CACHE_HOME: cache, __GL_SHADER_DISK_CACHE_PATH: cache },
    stdout: "inherit",
    stderr: "inherit",
  }).output();
  if (!child.success) throw new Error(`sass: the child running ${op} failed`);

  const rows: string[] = [];
  let kernel = 0;
  const files: string[] = [];
  const walk = (dir: string) => {
    for (const e of Deno.readDirSync(dir)) {
      const path = `${dir}/${e.name}`;
      if (e.isDirectory) walk(path);
      else if (e.name.endsWith(".bin")) files.push(path);
    }
  };
  walk(cache);
  if (files.length === 0) throw new Error(`sass: the driver cached nothing under ${cache}`);
  for (const file of files) {
    for (const frame of frames(Deno.readFileSync(file))) {
      const code = machineCode(frame);
      if (!code) continue;
      const raw = `${cache}/kernel${kernel}.sass`;
      Deno.writeFileSync(raw, code);
      const result = new Deno.Command(disassembler, { args: ["-b", "SM90", raw] }).outputSync();
      const text = new TextDecoder().decode(result.stdout);
      if (out) {
        Deno.mkdirSync(out, { recursive: true });
        Deno.writeTextFileSync(`${out}/kernel${kernel}.txt`, text);
      }
      const s = summarize(text);
      const c = (name: string) => s.counts[name] ?? 0;
      rows.push(
        `| ${kernel} | ${s.instructions} | ${s.registers} | ${s.spillStores} / ${s.spillLoads} | ` +
          `${c("LDG")} / ${c("STG")} | ${c("LDS")} / ${c("STS")} | ${
            c("ATOMG") + c("ATOM") + c("RED")
          } | ` +
          `${c("BAR")} | ${c("SHFL")} | ${c("BRA")} |`,
      );
      kernel++;
    }
  }
  console.log(
    `# Machine code of \`${op}\`${flags("override").map((o) => ` with ${o}`).join("")}\n`,
  );
  console.log(
    "| kernel | instructions | registers | spill stores / loads | global loads / stores | workgroup loads / stores | atomics | barriers | shuffles | branches |",
  );
  console.log("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
  for (const row of rows) console.log(row);
  Deno.removeSync(cache, { recursive: true });
}
