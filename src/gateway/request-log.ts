// The `mcp request` line at debug, one per answered client request of either era
// (docs/OPERATIONS.md, "Logs"): the method's metric label, sizes and latency, never content.
import type { Logger } from '../log.ts';
import { methodLabel } from '../metrics.ts';
import { requestLogFields } from '../observability/relay-spans.ts';
import { tracingOn } from '../observability/tracing.ts';

export function logMcpRequest(
  log: Logger,
  method: string,
  seconds: number,
  bytesIn: number | undefined,
  bytesOut: number,
  ex: object | undefined,
): void {
  if (!log.isLevelEnabled('debug')) return;
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
