// What a scenario module exports and what it gets while it runs. The runner (runScenario)
// owns the clock, the progress line, thresholds, the summary and the report files.
import type { CommonOptions, ExtraOptions } from './options.ts';
import type { MetricSet } from './metrics.ts';

export interface Target {
  /** What is measured, e.g. "accept rate / one core's P-256 verify rate". */
  name: string;
  /** The goal in words, e.g. "≥ 70 %". */
  goal: string;
  actual: number;
  unit: string;
  met: boolean;
}

export interface ScenarioContext {
  opts: CommonOptions;
  /** Seconds the scenario should spend loading (its default unless --duration). */
  durationS: number;
  metrics: MetricSet;
  /** Named figures for report.json (numbers, or small objects). */
  figures: Record<string, unknown>;
  /** What the progress line shows as "phones". */
  setPhones(n: number | (() => number)): void;
  setNote(note: string): void;
  target(t: Target): void;
  chart(file: string, title: string, svg: string): void;
  /** A line for report.md (and stdout): observations that the numbers alone do not say. */
  note(line: string): void;
  /** Runs at the end, last registered first, even if the scenario throws. */
  defer(fn: () => unknown): void;
  /** performance.now() after which every loop must stop: --duration after beginLoad (or the start). */
  deadline: number;
  /** Setup (relays, phones, sessions) is done: --duration counts from now, as k6's setup() is not in it. */
  beginLoad(): void;
  log(line: string): void;
}

export interface Scenario {
  name: string;
  description: string;
  defaultDurationS: number;
  /** Always evaluated, with any --threshold added. Correctness only: targets are reported, not enforced. */
  thresholds: string[];
  run(ctx: ScenarioContext): Promise<void>;
  /** Flags of this scenario alone, accepted beside the common ones (CommonOptions.extra). */
  options?: ExtraOptions;
  /**
   * Why this scenario cannot load a relay it did not start, when it cannot: `--target` is then
   * refused before anything starts, as a usage error (exit 64) naming this reason.
   */
  refusesTarget?: string;
  /** Seconds after which the runner gives up on the scenario; default max(600, 3 × duration + 300). */
  boundS?(opts: CommonOptions, durationS: number): number;
  /** Checks the options before anything starts; throws UsageError (exit 64) on what it cannot do. */
  validate?(opts: CommonOptions): void;
}
