/**
 * Online tuning (`setTuningMode("online")`, `runtime.tuning = "online"`): the first calls of a key
 * this machine has not measured run the user's work with alternatives to the consensus's choice,
 * each timed by the GPU (src/gpu/online.ts times a job's dispatches as one group and reads the
 * timestamps back when the work's own submission completes, without waiting for them); once every
 * alternative has its samples, the fastest is adopted for the key's cell (its power-of-two
 * buckets), loaded into the chooser as a user row and recorded in the tuning cache, so later runs
 * start from it. Pure bookkeeping: which choice a call gets and what the samples say.
 * @module
 */
import type { DeviceCaps } from "../core/caps.ts";
import { gridRows, rowBounds, sampleMedian } from "./choose_table.ts";
import { loadUserRows, userTableRows } from "./chooser.ts";
import {
  checkTuneKey,
  familyCandidates,
  legalChoice,
  TUNE_FAMILY,
  type TuneChoice,
  type TuneFamilyName,
  type TuneKey,
} from "./families.ts";
import { deviceFingerprint, sizeBucket } from "./fingerprint.ts";
import { recordTuning } from "./tuning_cache.ts";
import { messageOf, warnOnce } from "./_env.ts";

/** Timed calls each alternative gets before a key's winner is named. */
export const ONLINE_SAMPLES = 3;
/** The most choices tried at a key: the consensus's and its neighbours (one field changed). */
export const ONLINE_CANDIDATES = 6;
/** After each round, alternatives over this times the leader's median are tried no more. */
const ONLINE_DROP = 2;

/** One timed call's attribution: the trial and the alternative it ran. */
export interface OnlineSample {
  /** The trial's cell (family and key buckets). */
  cell: string;
  /** The alternative's index in the trial. */
  index: number;
}

/** A key's trial in progress, or concluded. */
export interface OnlineTrial {
  /** The family. */
  family: TuneFamilyName;
  /** The first key of the cell seen (the one measured). */
  key: TuneKey;
  /** The alternatives, the consensus's choice first. */
  candidates: TuneChoice[];
  /** Each alternative's timed calls, in microseconds. */
  times: number[][];
  /** Alternatives still tried. */
  live: boolean[];
  /** Calls issued (the next alternative is the next live one after this many). */
  issued: number;
  /** The winner, once every live alternative has its samples. */
  winner: TuneChoice | null;
}

let caps_: DeviceCaps | undefined;
/** Tuning-cache writes in flight. */
const recording = new Set<Promise<void>>();
const trials = new Map<string, OnlineTrial>();
let sampling = 0;
let pending: OnlineSample | null = null;

/** The cell of a key: its family and each variable's power-of-two bucket (flags as they are). */
function cellOf(family: TuneFamilyName, key: TuneKey): string {
  return `${family}|${
    TUNE_FAMILY[family].keys.map((k) => {
      const v = key[k.name];
      return typeof v === "boolean" ? String(v) : String(sizeBucket(v));
    }).join(",")
  }`;
}

/** Whether a user row (the tuning cache's, or an earlier trial's) covers `key`. */
function userCovers(family: TuneFamilyName, key: TuneKey): boolean {
  const values = TUNE_FAMILY[family].keys.map((k) => Number(key[k.name]));
  return (userTableRows()[family] ?? []).some((row) => {
    const { low, high } = rowBounds(family, row);
    return values.every((v, i) => v >= low[i] && v <= high[i]);
  });
}

/**
 * Opens or closes the window in which a device times a job (nested windows count; only the
 * outermost times). For devices.
 *
 * @example
 * ```ts
 * import { setOnlineSampling, takeOnlineSample } from "@gyre/gyre/tuning";
 * setOnlineSampling(true);
 * setOnlineSampling(false);
 * takeOnlineSample(); // null: no trial asked for a timing
 * ```
 */
export function setOnlineSampling(open: boolean): void {
  sampling = Math.max(0, sampling + (open ? 1 : -1));
}

/**
 * The timing the job just planned asked for (at most one a job), and clears it. For devices.
 *
 * @example
 * ```ts
 * import { takeOnlineSample } from "@gyre/gyre/tuning";
 * takeOnlineSample(); // null unless online tuning is trying a choice
 * ```
 */
export function takeOnlineSample(): OnlineSample | null {
  const sample = pending;
  pending = null;
  return sample;
}

/**
 * The choice for a call of `family` at `key` under online tuning: the cell's winner where its
 * trial has concluded (and it holds at this key); the consensus's (`decided`) where the user's rows cover the key or no
 * timing can be taken now (outside a device's window, or a timing already asked for by this
 * job); else the trial's next alternative, whose timing the device then takes.
 *
 * @example
 * ```ts
 * import { onlineChoice } from "@gyre/gyre/tuning";
 * const key = { r: 1, n: 4096, sg: false, al: true };
 * onlineChoice("reduce", undefined, key, { variant: 0, subgroups: 0 });
 * // { variant: 0, subgroups: 0 }: no device window is open
 * ```
 */
export function onlineChoice(
  family: TuneFamilyName,
  caps: DeviceCaps | undefined,
  key: TuneKey,
  decided: TuneChoice,
): TuneChoice {
  checkTuneKey("onlineChoice", family, key);
  const cell = cellOf(family, key);
  let trial = trials.get(cell);
  // The winner of the key's cell, where it holds at this key too.
  if (trial?.winner) {
    return legalChoice(family, caps, key, trial.winner) ? trial.winner : decided;
  }
  if (sampling === 0 || pending || !caps) return decided;
  if (!trial) {
    if (userCovers(family, key)) return decided;
    caps_ = caps;
    const differ = (c: TuneChoice) =>
      TUNE_FAMILY[family].fields.filter((f) => c[f.name] !== decided[f.name]).length;
    const near = familyCandidates(family, caps, key).filter((c) => differ(c) === 1);
    const candidates = [decided, ...near].slice(0, ONLINE_CANDIDATES);
    if (candidates.length < 2) return decided;
    trial = {
      family,
      key,
      candidates,
      times: candidates.map(() => []),
      live: candidates.map(() => true),
      issued: 0,
      winner: null,
    };
    trials.set(cell, trial);
  }
  // The next live alternative in turn, among those still short of their samples.
  const wanting = trial.candidates.map((_, i) => i).filter((i) =>
    trial.live[i] && trial.times[i].length < ONLINE_SAMPLES
  );
  if (!wanting.length) return decided; // samples in flight: their read-backs conclude it
  const index = wanting[trial.issued++ % wanting.length];
  pending = { cell, index };
  return trial.candidates[index];
}

/**
 * Records a timed call of a trial's alternative (GPU microseconds); after each round drops the
 * alternatives over twice the leader, and once every live one has its samples names the winner,
 * loads it as a user row over the key's cell and records it in the tuning cache. For devices.
 *
 * @example
 * ```ts
 * import { recordOnlineSample } from "@gyre/gyre/tuning";
 * recordOnlineSample({ cell: "no such trial", index: 0 }, 12.5); // ignored
 * ```
 */
export function recordOnlineSample(sample: OnlineSample, microseconds: number): void {
  const trial = trials.get(sample.cell);
  if (!trial || trial.winner || !(microseconds >= 0)) return;
  trial.times[sample.index].push(microseconds);
  const live = trial.candidates.map((_, i) => i).filter((i) => trial.live[i]);
  const rounds = Math.min(...live.map((i) => trial.times[i].length));
  if (rounds >= 1) {
    const lead = Math.min(...live.map((i) => sampleMedian(trial.times[i])));
    for (const i of live) {
      if (sampleMedian(trial.times[i]) > ONLINE_DROP * lead) trial.live[i] = false;
    }
  }
  const remaining = trial.candidates.map((_, i) => i).filter((i) => trial.live[i]);
  if (remaining.some((i) => trial.times[i].length < ONLINE_SAMPLES)) return;
  const best = remaining.reduce((a, b) =>
    sampleMedian(trial.times[b]) < sampleMedian(trial.times[a]) ? b : a
  );
  trial.winner = trial.candidates[best];
  adopt(trial, sampleMedian(trial.times[best]));
}

/** Loads a trial's winner as a user row over its cell, and records it in the tuning cache. */
function adopt(trial: OnlineTrial, us: number): void {
  // One key's grid: each variable over its power-of-two bucket (the cell), as the cache loads it.
  const [row] = gridRows(trial.family, [trial.key], [trial.winner!]);
  const rows = userTableRows();
  try {
    loadUserRows({ ...rows, [trial.family]: [row, ...(rows[trial.family] ?? [])] });
  } catch (e) {
    warnOnce(`online-load:${trial.family}`, `gyre: online tuning: ${messageOf(e)}`);
  }
  if (!caps_) return;
  const entry = {
    key: trial.key,
    choice: trial.winner!,
    us,
    measured: new Date().toISOString(),
  };
  const write = recordTuning(deviceFingerprint(caps_), trial.family, [entry]).catch((e) =>
    warnOnce("online-record", `gyre: online tuning could not record a winner: ${messageOf(e)}`)
  );
  recording.add(write);
  write.finally(() => recording.delete(write));
}

/**
 * Resolves when the winners online tuning has named so far are written to the tuning cache
 * (written without blocking the work; await this before a short script exits).
 *
 * @example
 * ```ts
 * import { onlineSettled } from "@gyre/gyre/tuning";
 * await onlineSettled();
 * ```
 */
export async function onlineSettled(): Promise<void> {
  await Promise.all([...recording]);
}

/**
 * The trials of online tuning, by cell: in progress and concluded (a copy).
 *
 * @example
 * ```ts
 * import { onlineTrials } from "@gyre/gyre/tuning";
 * onlineTrials().length; // 0 before any online tuning
 * ```
 */
export function onlineTrials(): OnlineTrial[] {
  return [...trials.values()].map((t) => ({
    ...t,
    candidates: [...t.candidates],
    times: t.times.map((x) => [...x]),
    live: [...t.live],
  }));
}

/**
 * Forgets online tuning's trials (their winners already loaded stay in the chooser).
 *
 * @example
 * ```ts
 * import { clearOnlineTrials, onlineTrials } from "@gyre/gyre/tuning";
 * clearOnlineTrials();
 * onlineTrials().length; // 0
 * ```
 */
export function clearOnlineTrials(): void {
  trials.clear();
  pending = null;
}
