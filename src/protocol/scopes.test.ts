import { describe, expect, it } from 'vitest';
import { checkMethod, METHOD_RULES, offlineRefusal } from './scopes.ts';

const ALL = { tools: {}, resources: { subscribe: true }, prompts: {}, completions: {}, logging: {} };

describe('checkMethod', () => {
  it('needs devices:read for every reading method', () => {
    for (const m of [
      'resources/list',
      'resources/templates/list',
      'resources/read',
      'resources/subscribe',
      'resources/unsubscribe',
      'prompts/list',
      'prompts/get',
      'completion/complete',
    ]) {
      expect(checkMethod(m, ALL, ['devices:lease', 'devices:act', 'runs:start']), m).toEqual({
        ok: false,
        reason: 'insufficient_scope',
        scope: 'devices:read',
      });
      expect(checkMethod(m, ALL, ['devices:read']), m).toEqual({ ok: true, perTool: false });
    }
  });

  it('needs devices:act for logging/setLevel (one level for every client of the phone)', () => {
    expect(checkMethod('logging/setLevel', ALL, ['devices:read'])).toMatchObject({ scope: 'devices:act' });
    expect(checkMethod('logging/setLevel', ALL, ['devices:act']).ok).toBe(true);
  });

  it('leaves tools to the catalog and ping to everyone', () => {
    expect(checkMethod('tools/call', ALL, [])).toEqual({ ok: true, perTool: true });
    expect(checkMethod('tools/list', ALL, [])).toEqual({ ok: true, perTool: false });
    expect(checkMethod('ping', {}, [])).toEqual({ ok: true, perTool: false });
  });

  it('refuses a method whose capability the phone did not advertise, whatever the scopes', () => {
    const none = checkMethod('prompts/get', { tools: {} }, ['devices:read']);
    expect(none).toMatchObject({ ok: false, reason: 'method_not_found' });
    expect(checkMethod('resources/subscribe', { resources: {} }, ['devices:read'])).toMatchObject({
      reason: 'method_not_found',
    });
    expect(checkMethod('resources/subscribe', { resources: { subscribe: false } }, ['devices:read']).ok).toBe(false);
    expect(checkMethod('tools/call', undefined, ['devices:read']).ok).toBe(false);
    expect(checkMethod('completion/complete', { completions: null }, ['devices:read']).ok).toBe(false);
  });

  it('refuses made-up methods and inherited property names', () => {
    for (const m of ['phone/anything', 'initialize', 'tasks/get', 'sampling/createMessage', 'constructor', '__proto__'])
      expect(checkMethod(m, ALL, ['devices:read', 'devices:act', 'devices:lease', 'runs:start']), m).toMatchObject({
        ok: false,
        reason: 'method_not_found',
      });
  });

  it('forwards tasks/* to a phone that advertises tasks, for every key (the phone scopes a task to its creator)', () => {
    const full = { tasks: { list: {}, cancel: {}, requests: { tools: { call: {} } } } };
    for (const m of ['tasks/get', 'tasks/result', 'tasks/list', 'tasks/cancel'])
      expect(checkMethod(m, full, ['devices:lease']), m).toEqual({ ok: true, perTool: false });
    // Listing and cancelling are capabilities of their own.
    expect(checkMethod('tasks/get', { tasks: {} }, []).ok).toBe(true);
    expect(checkMethod('tasks/list', { tasks: {} }, [])).toMatchObject({ ok: false, reason: 'method_not_found' });
    expect(checkMethod('tasks/cancel', { tasks: {} }, [])).toMatchObject({ ok: false, reason: 'method_not_found' });
    expect(checkMethod('tasks/get', { tools: {} }, [])).toMatchObject({ ok: false, reason: 'method_not_found' });
    // tasks/update exists only in the 2026-07-28 extension.
    expect(checkMethod('tasks/update', full, [])).toMatchObject({ ok: false, reason: 'method_not_found' });
  });

  it('forwards the tasks extension (SEP-2663) methods to a phone that advertises the extension', () => {
    const ext = { extensions: { 'io.modelcontextprotocol/tasks': {} } };
    for (const m of ['tasks/get', 'tasks/update', 'tasks/cancel'])
      expect(checkMethod(m, ext, []), m).toEqual({ ok: true, perTool: false });
    // The extension does not bring back the methods it removed.
    for (const m of ['tasks/result', 'tasks/list'])
      expect(checkMethod(m, ext, []), m).toMatchObject({ ok: false, reason: 'method_not_found' });
    // The key has a dot: it is one key, not a path through `io`.
    expect(checkMethod('tasks/get', { extensions: { io: { 'modelcontextprotocol/tasks': {} } } }, []).ok).toBe(false);
    expect(checkMethod('tasks/update', { extensions: {} }, [])).toMatchObject({
      ok: false,
      message: expect.stringContaining('extensions.io.modelcontextprotocol/tasks'),
    });
  });

  it('gives every listed method a scope', () => {
    for (const [m, rule] of Object.entries(METHOD_RULES)) expect(rule.scope, m).toBeTruthy();
  });
});

describe('offlineRefusal (a phone that is not connected)', () => {
  const init = { capabilities: { tools: {}, resources: {} }, serverInfo: { name: 'p', version: '1' } };

  it('refuses from the cached capabilities as the socket would: -32601, then the scope', () => {
    expect(offlineRefusal('completion/complete', init, ['devices:read'])).toEqual({
      code: -32601,
      message: 'Method not found: the phone does not offer completions (completion/complete)',
    });
    expect(offlineRefusal('resources/subscribe', init, ['devices:read'])?.code).toBe(-32601);
    expect(offlineRefusal('resources/read', init, ['devices:lease'])).toEqual({
      code: -31008,
      message: 'The credential lacks the scope this request needs: devices:read',
      data: { code: 'insufficient_scope', scope: 'devices:read' },
    });
  });

  it('leaves to the phone (undefined: device_offline) what it would serve', () => {
    expect(offlineRefusal('resources/read', init, ['devices:read'])).toBeUndefined();
    expect(offlineRefusal('tools/call', init, [])).toBeUndefined(); // the tool's scope needs the catalog
    expect(offlineRefusal('ping', init, [])).toBeUndefined();
  });

  it('without a cached result refuses only what no phone is asked', () => {
    for (const none of [null, undefined]) {
      expect(offlineRefusal('phone/anything', none, ['devices:read'])).toEqual({
        code: -32601,
        message: 'Method not found: phone/anything',
      });
      expect(offlineRefusal('completion/complete', none, ['devices:read'])).toBeUndefined();
      expect(offlineRefusal('resources/read', none, ['devices:lease'])).toBeUndefined();
    }
  });
});
