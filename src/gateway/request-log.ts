// The `mcp request` line at debug, one per answered client request of either era
// (docs/OPERATIONS.md, "Logs"): the method's metric label, sizes and latency, never content.
import { DEBUG_LEVEL, type Logger } from '../log.ts';
import { methodLabel } from '../metrics.ts';
import { requestLogFields } from '../observability/relay-spans.ts';
import { tracingOn } from '../observability/tracing.ts';

// The check runs on every answered call. `isLevelEnabled('debug')` looked the name up in the
// level table and called a comparison each time (0.38 thousand instructions per call under
// callgrind, docs/BENCHMARKS.md, "six more cuts"); `levelVal` is a getter on pino's prototype,
// read through the generic load IC from a logger in dictionary mode (about 300 instructions;
// docs/decisions/0260-reads-the-optimizer-left-generic.md). So each logger's answer is kept in
// a field, set again by pino's `level-change` event.

/** Whether a logger writes debug lines, kept per logger. */
class DebugGate {
  on: boolean;
  constructor(log: Logger) {
    this.on = log.levelVal <= DEBUG_LEVEL;
    log.on('level-change', () => {
      this.on = log.levelVal <= DEBUG_LEVEL;
    });
  }
}
const gates = new WeakMap<Logger, DebugGate>();

/** The `mcp request` line's writer for `log`: one per logger, shared by its endpoints. */
export class RequestLog {
  private readonly gate: DebugGate;
  constructor(private readonly log: Logger) {
    let g = gates.get(log);
    if (!g) gates.set(log, (g = new DebugGate(log)));
    this.gate = g;
  }

  write(method: string, seconds: number, bytesIn: number | undefined, bytesOut: number, ex: object | undefined): void {
    if (!this.gate.on) return;
    this.log.debug(
      {
        method: methodLabel(method),
        bytesIn,
        bytesOut,
        ms: Math.round(seconds * 10000) / 10,
        ...(tracingOn && ex && requestLogFields(ex)),
      },
      'mcp request',
    );
  }
}
