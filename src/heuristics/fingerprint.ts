/**
 * The device fingerprint that keys tuning results and shared hints: what makes one device's
 * measured choices valid for another (adapter vendor, architecture and description, whether it is
 * a software adapter, subgroup sizes, features, limits, gyre's version). Devices with equal
 * fingerprints run gyre's kernels alike; any difference keeps their results apart.
 * @module
 */
import type { DeviceCaps } from "../core/caps.ts";
import { VERSION } from "../version.ts";

/** The fields of a fingerprint, in a canonical order (features sorted). */
export interface DeviceFingerprint {
  /** The adapter's vendor; "wasm" for the WASM device. */
  vendor: string;
  /** Its architecture, "" where unreported. */
  architecture: string;
  /** Its description (e.g. "NVIDIA H200"). */
  description: string;
  /** A software or fallback adapter. */
  fallback: boolean;
  /** The smallest and largest subgroup sizes it reports. */
  subgroupSizes: [number, number];
  /** The features the device accepted, sorted. */
  features: string[];
  /** The limits gyre created the device with, by name, sorted. */
  limits: [string, number][];
  /** gyre's version. */
  gyre: string;
  /** A short stable id of all the above (16 hex digits of FNV-1a 64 over its canonical text). */
  id: string;
}

/**
 * The fingerprint of a GPU device from its capabilities, or of the WASM device (`null`: one
 * fingerprint for every CPU, whose kernels gyre does not tune by device).
 *
 * @example
 * ```ts
 * import * as gyre from "@gyre/gyre";
 * import { deviceFingerprint } from "@gyre/gyre/tuning";
 * const rt = await gyre.init({ device: "auto" });
 * const id = deviceFingerprint(rt.gpu?.caps ?? null).id; // e.g. "9f3c0a51d2e4b6c8"
 * ```
 */
export function deviceFingerprint(caps: DeviceCaps | null): DeviceFingerprint {
  const fields = caps
    ? {
      vendor: caps.vendor,
      architecture: caps.architecture ?? "",
      description: caps.description,
      fallback: caps.isFallbackAdapter,
      subgroupSizes: [caps.subgroupMinSize, caps.subgroupMaxSize] as [number, number],
      features: [...caps.features].sort(),
      limits: Object.entries(caps.limits).sort(([a], [b]) => (a < b ? -1 : 1)),
      gyre: VERSION,
    }
    : {
      vendor: "wasm",
      architecture: "",
      description: "WebAssembly",
      fallback: false,
      subgroupSizes: [0, 0] as [number, number],
      features: [],
      limits: [],
      gyre: VERSION,
    };
  return { ...fields, id: fnv1a64(JSON.stringify(fields)) };
}

/** FNV-1a, 64 bits, as 16 hex digits (stable across runs and platforms). */
function fnv1a64(text: string): string {
  let hash = 0xcbf29ce484222325n;
  const bytes = new TextEncoder().encode(text);
  for (const b of bytes) {
    hash ^= BigInt(b);
    hash = (hash * 0x100000001b3n) & 0xffffffffffffffffn;
  }
  return hash.toString(16).padStart(16, "0");
}

/**
 * The power-of-two bucket of a size (the largest power of two at or below it; 0 for 0): keys of
 * sizes in one bucket share a tuned choice.
 *
 * @example
 * ```ts
 * import { sizeBucket } from "@gyre/gyre/tuning";
 * sizeBucket(5000); // 4096
 * ```
 */
export function sizeBucket(size: number): number {
  if (!(size >= 1)) return 0;
  // log2 of a size just below a large power of two may round up to it.
  let bucket = 2 ** Math.floor(Math.log2(size));
  while (bucket > size) bucket /= 2;
  return bucket;
}
