/**
 * Reading NVIDIA's shader cache and `nvdisasm`'s output for `bench/sass.ts`: the cache's zstd
 * frames, a kernel's machine code inside one, and a summary of its disassembly.
 * @module
 */
import { zstdDecompressSync } from "node:zlib";

const ZSTD = [0x28, 0xb5, 0x2f, 0xfd];
const EXIT = [0x4d, 0x79, 0, 0, 0, 0, 0, 0];
const NOP = [0x18, 0x79, 0, 0, 0, 0, 0, 0];

function startsWith(bytes: Uint8Array, at: number, pattern: number[]): boolean {
  return pattern.every((b, i) => bytes[at + i] === b);
}

/**
 * Where the zstd frame starting at `at` ends (RFC 8878: header, blocks, optional checksum): the
 * cache stores frames back to back with other data, and the decompressor rejects trailing bytes.
 *
 * @example
 * ```ts
 * import { zstdCompressSync } from "node:zlib";
 * const frame = new Uint8Array(zstdCompressSync(new Uint8Array(100)));
 * console.log(frameEnd(frame, 0) === frame.length); // true
 * ```
 */
export function frameEnd(bytes: Uint8Array, at: number): number {
  const descriptor = bytes[at + 4];
  const contentSizeFlag = descriptor >> 6;
  const singleSegment = (descriptor >> 5) & 1;
  const checksum = (descriptor >> 2) & 1;
  const dictionaryBytes = [0, 1, 2, 4][descriptor & 3];
  const contentSizeBytes = [singleSegment ? 1 : 0, 2, 4, 8][contentSizeFlag];
  let i = at + 5 + (singleSegment ? 0 : 1) + dictionaryBytes + contentSizeBytes;
  for (;;) {
    if (i + 3 > bytes.length) throw new RangeError("zstd frame runs past the data");
    const header = bytes[i] | (bytes[i + 1] << 8) | (bytes[i + 2] << 16);
    const size = header >> 3;
    i += 3 + (((header >> 1) & 3) === 1 ? 1 : size); // an RLE block stores one byte
    if (header & 1) return i + (checksum ? 4 : 0);
  }
}

/**
 * The zstd frames of a cache file, decompressed.
 *
 * @example
 * ```ts
 * const kernels = frames(Deno.readFileSync("cache.bin")).map(machineCode).filter((c) => c);
 * ```
 */
export function frames(file: Uint8Array): Uint8Array[] {
  const out: Uint8Array[] = [];
  for (let i = 0; i + 4 <= file.length; i++) {
    if (!startsWith(file, i, ZSTD)) continue;
    try {
      const end = frameEnd(file, i);
      out.push(new Uint8Array(zstdDecompressSync(file.subarray(i, end))));
      i = end - 1;
    } catch {
      // a magic number inside other data, not a frame
    }
  }
  return out;
}

/**
 * A kernel's machine code (with the driver's helper routines after it): from the end of its
 * header to the last EXIT before a run of four NOPs (the padding after the code), padded with
 * NOPs to 128 bytes (nvdisasm reads raw code in whole 128-byte blocks). Null for a frame that
 * holds no kernel.
 *
 * @example
 * ```ts
 * const code = machineCode(frames(Deno.readFileSync("cache.bin"))[5]);
 * if (code) Deno.writeFileSync("kernel.sass", code); // then: nvdisasm -b SM90 kernel.sass
 * ```
 */
export function machineCode(frame: Uint8Array): Uint8Array | null {
  if (new TextDecoder().decode(frame.subarray(0, 8)) !== "NVDANVVM") return null;
  const start = new DataView(frame.buffer, frame.byteOffset).getUint32(0x30, true) + 0x18;
  let end = -1;
  let nops = 0;
  for (let i = start; i + 16 <= frame.length && nops < 4; i += 16) {
    nops = startsWith(frame, i, NOP) ? nops + 1 : 0;
    if (startsWith(frame, i, EXIT)) end = i + 16;
  }
  if (end < 0) return null;
  const code = new Uint8Array(Math.ceil((end - start) / 128) * 128);
  code.set(frame.subarray(start, end));
  for (let i = end - start; i < code.length; i += 16) {
    code.set([...NOP, 0, 0, 0, 0, 0, 0xc0, 0x0f, 0], i);
  }
  return code;
}

/** What {@link summarize} reads from a disassembly. */
export interface Summary {
  instructions: number;
  /** The highest register named, plus one (a wide load's or store's pair or quad counted). */
  registers: number;
  /** Stores and loads of spilled values: local memory, or workgroup memory through R1. */
  spillStores: number;
  spillLoads: number;
  /** Instructions by mnemonic without suffixes (`LDG`, `FFMA`, `BAR`, ...). */
  counts: Record<string, number>;
}

/**
 * Registers, spills and instruction counts of one `nvdisasm` listing.
 *
 * @example
 * ```ts
 * const line = "        /" + "*0000*" + "/    LDG.E.128 R4, [R2.U32+UR4] ;";
 * console.log(summarize(line).registers); // 8: R4..R7 loaded
 * ```
 */
export function summarize(text: string): Summary {
  const lines = text.split("\n").filter((l) => /^\s+\/\*[0-9a-f]{4,}\*\//.test(l));
  let registers = 0;
  let spillStores = 0;
  let spillLoads = 0;
  const counts: Record<string, number> = {};
  for (const line of lines) {
    const body = line.replace(/^\s+\/\*[0-9a-f]+\*\/\s+/, "").replace(/^@!?P\w+\s+/, "");
    const [mnemonic, ...rest] = body.split(/\s+/);
    const operands = rest.join(" ");
    const base = mnemonic.split(".")[0];
    counts[base] = (counts[base] ?? 0) + 1;
    // A wide load or store moves 2 or 4 consecutive registers; an address (in brackets) is one.
    const width = /\.128\b/.test(mnemonic) ? 4 : /\.64\b/.test(mnemonic) ? 2 : 1;
    const unbracketed = operands.replace(/\[[^\]]*\]/g, "");
    for (const m of operands.matchAll(/\bR(\d+)\b/g)) {
      registers = Math.max(registers, Number(m[1]) + 1);
    }
    for (const m of unbracketed.matchAll(/\bR(\d+)\b/g)) {
      registers = Math.max(registers, Number(m[1]) + width);
    }
    if (base === "STL") spillStores++;
    if (base === "LDL") spillLoads++;
    if (base === "STS" && /\[R1[\]+]/.test(operands)) spillStores++;
    if (base === "LDS" && /\[R1[\]+]/.test(operands)) spillLoads++;
  }
  return { instructions: lines.length, registers, spillStores, spillLoads, counts };
}
