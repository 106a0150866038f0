// The `mcp request` line at debug, one per answered client request of either era
// (docs/OPERATIONS.md, "Logs"): the method's metric label, sizes and latency, never content.
import { DEBUG_LEVEL, type Logger } from '../log.ts';
import { methodLabel } from '../metrics.ts';
import { requestLogFields } from '../observability/relay-spans.ts';
import { tracingOn } from '../observability/tracing.ts';

// The check runs on every answered call: `isLevelEnabled('debug')` looked the name up in the
// level table and called a comparison each time (0.38 thousand instructions per call under
// callgrind, docs/BENCHMARKS.md, "six more cuts"); the numeric level is the same test for
// pino's default levels, which src/log.ts uses.
export function logMcpRequest(
  log: Logger,
  method: string,
  seconds: number,
  bytesIn: number | undefined,
  bytesOut: number,
  ex: object | undefined,
): void {
  if (log.levelVal > DEBUG_LEVEL) return;
  log.debug(
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
