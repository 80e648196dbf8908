/**
 * bench/_sass_parse.ts on synthetic data: zstd frames found among other bytes, a kernel's code cut
 * out of a cache frame, and the summary of a disassembly.
 * @module
 */
import assert from "node:assert/strict";
import { zstdCompressSync } from "node:zlib";
import { frameEnd, frames, machineCode, summarize } from "../bench/_sass_parse.ts";

const bytes = (n: number, seed: number) =>
  Uint8Array.from({ length: n }, (_, i) => (i * seed) & 0xff);

Deno.test("frames: every zstd frame among other bytes, a stray magic number skipped", () => {
  const a = bytes(5000, 7);
  const b = new Uint8Array(300).fill(7);
  const za = new Uint8Array(zstdCompressSync(a));
  // By hand: one RLE block (a single stored byte repeated 300 times), 300 - 256 in two size bytes.
  const zb = Uint8Array.from([0x28, 0xb5, 0x2f, 0xfd, 0x60, 44, 0, 0x63, 0x09, 0x00, 7]);
  assert.equal(frameEnd(za, 0), za.length);
  assert.equal(frameEnd(zb, 0), zb.length);
  const stray = [0x28, 0xb5, 0x2f, 0xfd, 1, 2, 3];
  const file = Uint8Array.from([9, 9, ...za, ...stray, 4, ...zb, 0xff]);
  const found = frames(file);
  assert.equal(found.length, 2);
  assert.deepEqual(found[0], a);
  assert.deepEqual(found[1], b);
});

Deno.test("machineCode: from the header's end to the last EXIT before the padding, in 128-byte blocks", () => {
  const instruction = (lo: number[]) => [...lo, ...new Array(16 - lo.length).fill(0)];
  const exit = instruction([0x4d, 0x79]);
  const nop = instruction([0x18, 0x79]);
  const other = instruction([0x19, 0x79, 0x02]);
  const header = new Uint8Array(0x40);
  header.set(new TextEncoder().encode("NVDANVVM"));
  new DataView(header.buffer).setUint32(0x30, 0x40 - 0x18, true);
  const body = [...other, ...exit, ...other, ...exit, ...nop, ...nop, ...nop, ...nop, ...other];
  const code = machineCode(Uint8Array.from([...header, ...body]));
  assert.ok(code);
  assert.equal(code.length, 128);
  assert.deepEqual([...code.subarray(0, 64)], body.slice(0, 64));
  assert.deepEqual([...code.subarray(64, 66)], [0x18, 0x79]); // padded with NOPs
  assert.equal(machineCode(Uint8Array.from([...bytes(64, 3), ...body])), null);
});

Deno.test("summarize: registers with wide loads and stores, spills through R1 and local memory", () => {
  const line = (address: number, text: string) =>
    `        /*${address.toString(16).padStart(4, "0")}*/                   ${text} ;`;
  const text = [
    '\t.headerflags\t@"EF_CUDA_SM90"',
    line(0, "S2R R2, SR_TID.X"),
    line(0x10, "LDG.E.128.CONSTANT R8, [R40.U32+UR4], !P0"),
    line(0x20, "FADD.FTZ R3, R8, R11"),
    line(0x30, "STS [R1+0x18], R3"),
    line(0x40, "@!P3 LDS R9, [R1+0x18]"),
    line(0x50, "STL [R1+0x4], R9"),
    line(0x60, "STG.E.64 [R20.U32+UR4], R12"),
    line(0x70, "BAR.SYNC 0x0"),
    line(0x80, "EXIT"),
  ].join("\n");
  const s = summarize(text);
  assert.equal(s.instructions, 9);
  assert.equal(s.registers, 41); // R40 as an address; R8..R11 and R12..R13 below it
  assert.equal(s.spillStores, 2);
  assert.equal(s.spillLoads, 1);
  assert.equal(s.counts.LDG, 1);
  assert.equal(s.counts.BAR, 1);
  assert.equal(summarize(line(0, "LDG.E.128 R60, [R2.U32+UR4]")).registers, 64);
});
