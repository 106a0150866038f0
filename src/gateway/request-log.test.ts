import { describe, expect, it } from 'vitest';
import { createLogger } from '../log.ts';
import { logMcpRequest } from './request-log.ts';

describe('logMcpRequest', () => {
  it('writes its line at debug and trace, and none at info, warn or silent', () => {
    const written = (level: string) => {
      const lines: string[] = [];
      const log = createLogger({ level, destination: { write: (l) => void lines.push(l) } });
      logMcpRequest(log, 'tools/call', 0.0123, 10, 20, undefined);
      return lines.map((l) => JSON.parse(l) as { msg: string; method: string; ms: number });
    };
    for (const level of ['trace', 'debug'])
      expect(written(level), level).toMatchObject([{ msg: 'mcp request', method: 'tools/call', ms: 12.3 }]);
    for (const level of ['info', 'warn', 'silent']) expect(written(level), level).toEqual([]);
  });

  it('follows a level changed after the logger was made', () => {
    const lines: string[] = [];
    const log = createLogger({ level: 'info', destination: { write: (l) => void lines.push(l) } });
    logMcpRequest(log, 'ping', 0.001, 1, 1, undefined);
    log.level = 'debug';
    logMcpRequest(log, 'ping', 0.001, 1, 1, undefined);
    expect(lines).toHaveLength(1);
  });
});
