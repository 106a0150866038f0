// Short runs of the load tool end to end, as `npm run loadtest` runs them: real relay
// processes, real phones' sockets, real HTTP clients. They check the reports, not speed.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { XMLValidator } from 'fast-xml-parser';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const outRoot = mkdtempSync(join(tmpdir(), 'pb-loadtest-smoke-'));
afterAll(() => rmSync(outRoot, { recursive: true, force: true }));

function loadtest(
  args: string[],
  timeoutMs = 90_000,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'loadtest/run.ts', ...args], {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

function report(dir: string): any {
  return JSON.parse(readFileSync(join(dir, 'report.json'), 'utf8'));
}

function expectCharts(dir: string, r: any): void {
  expect(r.charts.length).toBeGreaterThan(0);
  const md = readFileSync(join(dir, 'report.md'), 'utf8');
  for (const c of r.charts) {
    expect(md).toContain(`](${c.file})`);
    expect(XMLValidator.validate(readFileSync(join(dir, c.file), 'utf8'))).toBe(true);
  }
}

describe('npm run loadtest (smoke)', () => {
  it('framing: every payload up to 256 KiB intact, 256 KiB + 1 refused both ways', async () => {
    const out = join(outRoot, 'framing');
    const r = await loadtest(['framing', '--duration', '4', '--phones', '3', '--out', out]);
    expect(r.stderr).not.toContain('loadtest:');
    expect(r.code).toBe(0);
    const rep = report(out);
    expect(rep.passed).toBe(true);
    expect(rep.metrics.calls.values.count).toBeGreaterThan(10);
    expect(rep.metrics.corrupted.values.count).toBe(0);
    expect(rep.figures.oversize_answer.closeCode).toBe(1009);
    expect(rep.figures.oversize_answer.clientSaw).toContain('over the 256 KiB limit');
    expect(rep.figures.oversize_request.status).toBe(413);
    expect(rep.figures.bystander_errors_during_oversize).toBe(0);
    expect(rep.figures.largest_upload_frame_at_phone).toBeGreaterThan(256 * 1024 - 16);
    expect(rep.figures.largest_upload_frame_at_phone).toBeLessThanOrEqual(256 * 1024);
    expect(Object.keys(rep.figures.mb_per_s)).toEqual(['4 KiB', '64 KiB', '256 KiB']);
    // The ratio's MB/s counts every answer of its rounds in full (eight callers add to one
    // total): 256 KiB frames, give or take the client's id put back in place of the relay's.
    for (const round of rep.figures.answers_only_256k_rounds) {
      expect(round.answers).toBeGreaterThan(0);
      expect(Math.abs(round.bytes / round.answers - 256 * 1024)).toBeLessThan(64);
    }
    expect(rep.thresholds.every((v: any) => v.ok)).toBe(true);
    expectCharts(out, rep);
    expect(r.stdout).toContain('PASSED');
  });

  it('timeouts (scaled): late answers time out on time, long polls and cancellations leave nothing behind', async () => {
    const out = join(outRoot, 'timeouts');
    const r = await loadtest(['timeouts', '--time-scale', '0.01', '--duration', '4', '--phones', '6', '--out', out]);
    expect(r.code).toBe(0);
    const rep = report(out);
    expect(rep.figures.request_deadline_ms).toBe(300);
    expect(rep.metrics.timeout_overshoot.values.count).toBeGreaterThan(0);
    expect(rep.metrics.wait_slack.values.count).toBeGreaterThan(0);
    expect(rep.metrics.cancel_delivered.values.count).toBeGreaterThan(0);
    expect(rep.metrics.late_answers_sent.values.count).toBeGreaterThan(0);
    expect(rep.figures.leaks.pending).toBe(0);
    expect(rep.figures.leaks.sseStreams).toBe(0);
    expect(rep.figures.after.pending).toBe(0);
    expectCharts(out, rep);
  });

  it('capacity: a few hundred idle phones with the reference catalog, memory per phone from the relay', async () => {
    const out = join(outRoot, 'capacity');
    const r = await loadtest(['capacity', '--phones', '200', '--duration', '15', '--out', out]);
    expect(r.code).toBe(0);
    const rep = report(out);
    expect(rep.metrics.phones_connected.values.value).toBe(200);
    expect(rep.figures.relay_idle.devices).toBe(200);
    expect(rep.figures.relay_idle.initialized).toBe(200);
    expect(rep.figures.relay_idle.afterGc).toBe(true);
    expect(rep.figures.catalog_tools).toBeGreaterThan(10);
    expect(Number.isFinite(rep.metrics.relay_rss_per_phone_kib.values.value)).toBe(true);
    expect(rep.targets.map((t: any) => t.name)).toContain('relay RSS per idle phone (after GC)');
    // The bound on phones per node, read from the relay process itself.
    expect(rep.figures.relay_open_file_limit.soft).toBeGreaterThan(200);
    expect(rep.figures.relay_open_file_limit.hard).toBeGreaterThanOrEqual(rep.figures.relay_open_file_limit.soft);
    expectCharts(out, rep);
  });

  it('an impossible threshold fails the run (exit 99) and says which', async () => {
    const out = join(outRoot, 'impossible');
    const r = await loadtest([
      'timeouts',
      '--time-scale',
      '0.01',
      '--duration',
      '2',
      '--phones',
      '3',
      '--out',
      out,
      '--threshold',
      'call_duration:p(99)<0',
    ]);
    expect(r.code).toBe(99);
    const rep = report(out);
    expect(rep.passed).toBe(false);
    const v = rep.thresholds.find((t: any) => t.threshold === 'call_duration:p(99)<0');
    expect(v).toMatchObject({ ok: false });
    expect(v.actual).toBeGreaterThan(0);
    expect(rep.thresholds.filter((t: any) => !t.ok)).toHaveLength(1);
    expect(r.stdout).toContain('✗ call_duration:p(99)<0');
    expect(r.stdout).toContain('FAILED');
  });

  it('a malformed threshold is refused before anything starts', async () => {
    const out = join(outRoot, 'malformed');
    const r = await loadtest(['framing', '--out', out, '--threshold', 'call_duration:p99<250']);
    expect(r.code).toBe(64);
    expect(r.stderr).toContain(`threshold 'call_duration:p99<250': unknown aggregate "p99"`);
    expect(existsSync(out)).toBe(false);
  });
});
