import { describe, expect, it } from 'vitest';
import { createLogger } from '../log.ts';
import { RequestLog } from './request-log.ts';

describe('RequestLog', () => {
  it('writes its line at debug and trace, and none at info, warn or silent', () => {
    const written = (level: string) => {
      const lines: string[] = [];
      const log = createLogger({ level, destination: { write: (l) => void lines.push(l) } });
      new RequestLog(log).write('tools/call', 0.0123, 10, 20, undefined);
      return lines.map((l) => JSON.parse(l) as { msg: string; method: string; ms: number });
    };
    for (const level of ['trace', 'debug'])
      expect(written(level), level).toMatchObject([{ msg: 'mcp request', method: 'tools/call', ms: 12.3 }]);
    for (const level of ['info', 'warn', 'silent']) expect(written(level), level).toEqual([]);
  });

  it('follows a level changed after the logger was made', () => {
    const lines: string[] = [];
    const log = createLogger({ level: 'info', destination: { write: (l) => void lines.push(l) } });
    const requests = new RequestLog(log);
    requests.write('ping', 0.001, 1, 1, undefined);
    log.level = 'debug';
    requests.write('ping', 0.001, 1, 1, undefined);
    expect(lines).toHaveLength(1);
    log.level = 'warn';
    new RequestLog(log).write('ping', 0.001, 1, 1, undefined); // a second writer shares the first's gate
    requests.write('ping', 0.001, 1, 1, undefined);
    expect(lines).toHaveLength(1);
    expect(log.listenerCount('level-change'), 'one listener per logger').toBe(1);
  });
});
