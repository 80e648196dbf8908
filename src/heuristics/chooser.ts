/**
 * The table layer of the chooser (C): the WASM module's compiled `choose` (the reference
 * devices' tuned tables, src/heuristics/tables/) and the user's own tuning results, loaded as
 * rows into the same chooser's memory and matched first. Its own instance of the kernel module
 * over a small memory of its own, so it works with or without the WASM device. The module comes
 * from the runtime ({@link provideChooserModule}): decisions name no device module.
 * @module
 */
import type { DeviceCaps } from "../core/caps.ts";
import { checkOptions } from "../core/options.ts";
import { CHOOSE_DEVICES } from "./_choose_devices.ts";
import { CHOOSE_MAX, CHOOSE_ROW_WORDS, type ChooseRow, rowWords } from "./choose_table.ts";
import {
  checkTuneFamilies,
  TUNE_FAMILIES,
  TUNE_FAMILY,
  type TuneChoice,
  type TuneFamilyName,
  type TuneKey,
} from "./families.ts";

/** Where the user's rows start in the chooser's memory (past the module's static data). */
const USER_ROWS_AT = 65536;

interface Chooser {
  memory: WebAssembly.Memory;
  choose: (
    family: number,
    device: number,
    k0: number,
    k1: number,
    k2: number,
    k3: number,
  ) => number;
  value: (field: number) => number;
  setUserRows: (at: number, count: number) => void;
}

let chooser: Chooser | null = null;

/** The compiled kernel module and its imports over a memory, as the runtime provides them. */
export interface ChooserModule {
  /** The compiled module (its `choose` exports). */
  module: () => WebAssembly.Module;
  /** Its imports over `memory`. */
  imports: (memory: WebAssembly.Memory) => WebAssembly.Imports;
}
let source: ChooserModule | null = null;

/**
 * Gives the chooser the kernel module it instantiates (the runtime does, on import).
 *
 * @example
 * ```ts
 * import { provideChooserModule } from "@gyre/gyre/tuning";
 * console.log(typeof provideChooserModule); // "function"; src/runtime.ts calls it
 * ```
 */
export function provideChooserModule(module: ChooserModule): void {
  source = module;
  chooser = null;
}
let userRows: Partial<Record<TuneFamilyName, readonly ChooseRow[]>> = {};
/** Families whose compiled tables the user's rows replace (a whole grid tuned here). */
let replaced = new Set<TuneFamilyName>();
/** Bumped whenever the rows change, so cached decisions are dropped. */
let tableVersion = 0;

function instance(): Chooser {
  if (chooser) return chooser;
  if (!source) throw new Error("internal: the chooser's module was not provided (src/runtime.ts)");
  const memory = new WebAssembly.Memory({ initial: 2 });
  const e = new WebAssembly.Instance(source.module(), source.imports(memory))
    .exports as Record<string, (...args: number[]) => number>;
  chooser = {
    memory,
    choose: e.choose,
    value: e.choose_value,
    setUserRows: e.choose_set_user_rows,
  };
  return chooser;
}

/**
 * The index of the compiled table for a device (by its adapter's description), or -1.
 *
 * @example
 * ```ts
 * import { tableDevice } from "@gyre/gyre/tuning";
 * tableDevice(undefined); // -1: no device, no table
 * ```
 */
export function tableDevice(caps: DeviceCaps | undefined): number {
  if (!caps) return -1;
  return CHOOSE_DEVICES.findIndex((d) => new RegExp(d.match).test(caps.description));
}

/**
 * The names of the devices whose tables are compiled in.
 *
 * @example
 * ```ts
 * import { tableDevices } from "@gyre/gyre/tuning";
 * tableDevices(); // ["lavapipe", "nvidia-h100", "nvidia-h200"]
 * ```
 */
export function tableDevices(): string[] {
  return CHOOSE_DEVICES.map((d) => d.name);
}

/**
 * Loads the user's own tuning results as rows of the WASM chooser (replacing those loaded
 * before), matched before the compiled tables. A ValueError for a malformed row; nothing of a
 * failing call is loaded. Families named in `replacing` (a whole grid tuned on this device, as
 * `tune` does) set their compiled tables aside: where their rows do not reach, the plan decides,
 * since the tuner leaves out the cells where it found the plan as fast. Families replaced before
 * stay replaced while `rows` holds them.
 *
 * @example
 * ```ts
 * import { loadUserRows, tableChoice } from "@gyre/gyre/tuning";
 * loadUserRows({ scan: [{ r: 1, n_min: 4096, n_max: 8191, sg: false, variant: 2, wg: 256, ept: 16 }] });
 * tableChoice("scan", undefined, { r: 1, n: 5000, sg: false, al: false });
 * // { variant: 2, wg: 256, ept: 16 }
 * loadUserRows({});
 * ```
 */
export function loadUserRows(
  rows: Partial<Record<TuneFamilyName, readonly ChooseRow[]>>,
  options: { replacing?: readonly TuneFamilyName[] } = {},
): void {
  checkOptions("loadUserRows", options, ["replacing"]);
  checkTuneFamilies("loadUserRows", "options.replacing", options.replacing ?? []);
  const parts = TUNE_FAMILIES.filter((f) => rows[f]?.length).map((f) => rowWords(f, rows[f]!));
  const count = parts.reduce((n, p) => n + p.length / CHOOSE_ROW_WORDS, 0);
  const c = instance();
  const bytes = USER_ROWS_AT + count * CHOOSE_ROW_WORDS * 4;
  if (bytes > c.memory.buffer.byteLength) {
    c.memory.grow(Math.ceil((bytes - c.memory.buffer.byteLength) / 65536));
  }
  let at = USER_ROWS_AT / 4;
  for (const p of parts) {
    new Int32Array(c.memory.buffer).set(p, at);
    at += p.length;
  }
  c.setUserRows(USER_ROWS_AT, count);
  userRows = { ...rows };
  replaced = new Set([
    ...[...replaced].filter((f) => f in rows),
    ...(options.replacing ?? []),
  ]);
  tableVersion++;
}

/**
 * The families whose compiled tables the user's rows replace now (see {@link loadUserRows}).
 *
 * @example
 * ```ts
 * import { loadUserRows, replacedTables } from "@gyre/gyre/tuning";
 * loadUserRows({ scan: [] }, { replacing: ["scan"] });
 * replacedTables(); // ["scan"]
 * loadUserRows({});
 * replacedTables(); // []
 * ```
 */
export function replacedTables(): TuneFamilyName[] {
  return [...replaced];
}

/**
 * The user's rows loaded now.
 *
 * @example
 * ```ts
 * import { userTableRows } from "@gyre/gyre/tuning";
 * console.log(Object.keys(userTableRows())); // the families with rows of the user's
 * ```
 */
export function userTableRows(): Partial<Record<TuneFamilyName, readonly ChooseRow[]>> {
  return userRows;
}

/**
 * A counter that changes whenever the table's rows do (cached decisions are dropped then).
 *
 * @example
 * ```ts
 * import { chooseTableVersion, loadUserRows } from "@gyre/gyre/tuning";
 * const before = chooseTableVersion();
 * loadUserRows({});
 * chooseTableVersion() > before; // true
 * ```
 */
export function chooseTableVersion(): number {
  return tableVersion;
}

/**
 * The table's choice (C) for `family` at `key` on a device: the user's rows first, then the
 * device's compiled table unless the user's replace it; null where no row covers the key.
 *
 * @example
 * ```ts
 * import { tableChoice } from "@gyre/gyre/tuning";
 * tableChoice("rankk", undefined, { r: 8, c: 65536, k: 64, sg: true }); // null: no table
 * ```
 */
export function tableChoice(
  family: TuneFamilyName,
  caps: DeviceCaps | undefined,
  key: TuneKey,
): TuneChoice | null {
  const f = TUNE_FAMILY[family];
  const words = f.keys.map((k) => {
    const v = key[k.name];
    return typeof v === "boolean" ? Number(v) : Math.max(0, Math.min(CHOOSE_MAX, Math.round(v)));
  });
  while (words.length < 4) words.push(0);
  const c = instance();
  const [k0, k1, k2, k3] = words;
  const device = replaced.has(family) ? -1 : tableDevice(caps);
  const hit = c.choose(TUNE_FAMILIES.indexOf(family), device, k0, k1, k2, k3);
  if (!hit) return null;
  return Object.fromEntries(f.fields.map((field, i) => [field.name, c.value(i)]));
}
