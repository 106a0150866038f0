import { describe, expect, it } from 'vitest';
import {
  acknowledgeSubscription,
  classifyEra,
  decodeHeaderValue,
  checkTaskMethod,
  declaresTasks,
  discoverResult,
  withoutLegacyTask,
  encodeHeaderValue,
  finishStatelessResult,
  finishStatelessResultFrame,
  honouredFilter,
  listenNotAcceptable,
  parseSubscriptionFilter,
  shouldForwardLog,
  STATELESS_METHODS,
  subscriptionClosedResult,
  subscriptionNotification,
  validateStatelessRequest,
  type Headers,
} from './stateless.ts';

const META = {
  'io.modelcontextprotocol/protocolVersion': '2026-07-28',
  'io.modelcontextprotocol/clientInfo': { name: 't', version: '1' },
  'io.modelcontextprotocol/clientCapabilities': {},
};
const req = (method: string, params: Record<string, unknown> = {}, meta: unknown = META) => ({
  jsonrpc: '2.0' as const,
  id: 7,
  method,
  params: meta === 'none' ? params : { ...params, _meta: meta },
});
const hdr = (method: string, extra: Record<string, string> = {}): Headers => ({
  'mcp-protocol-version': '2026-07-28',
  'mcp-method': method,
  ...extra,
});

describe('classifyEra', () => {
  it('serves modern _meta statelessly, whatever else is there', () => {
    expect(classifyEra({}, req('tools/list'))).toBe('stateless');
    expect(classifyEra({ 'mcp-session-id': 'abc' }, req('tools/list'))).toBe('stateless');
    // initialize with modern _meta is a stateless request (and gets 404 there)
    expect(classifyEra(hdr('initialize'), req('initialize'))).toBe('stateless');
    expect(
      classifyEra({}, req('tools/list', {}, { ...META, 'io.modelcontextprotocol/protocolVersion': '1900-01-01' })),
    ).toBe('stateless');
  });
  it('keeps initialize, session ids and session revisions in the session era', () => {
    expect(
      classifyEra({}, { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25' } }),
    ).toBe('session');
    expect(
      classifyEra(
        { 'mcp-session-id': 's', 'mcp-protocol-version': '2025-11-25' },
        { jsonrpc: '2.0', id: 1, method: 'tools/list' },
      ),
    ).toBe('session');
    expect(classifyEra({ 'mcp-protocol-version': '2025-06-18' }, { jsonrpc: '2.0', id: 1, method: 'tools/list' })).toBe(
      'session',
    );
    expect(classifyEra({}, { jsonrpc: '2.0', id: 1, method: 'tools/list' })).toBe('session');
    expect(classifyEra({}, [req('tools/list')])).toBe('session');
    expect(
      classifyEra({}, req('tools/list', {}, { ...META, 'io.modelcontextprotocol/protocolVersion': '2025-11-25' })),
    ).toBe('session');
  });
  it('treats a non-session MCP-Protocol-Version header as stateless so errors are modern', () => {
    expect(
      classifyEra(
        { 'MCP-Protocol-Version': '2026-07-28' },
        { jsonrpc: '2.0', id: 1, method: 'server/discover', params: {} },
      ),
    ).toBe('stateless');
    expect(classifyEra({ 'mcp-protocol-version': '1900-01-01' }, { jsonrpc: '2.0', id: 1, method: 'tools/list' })).toBe(
      'stateless',
    );
  });
  it('classifies GET and DELETE from headers alone', () => {
    expect(classifyEra({ 'mcp-protocol-version': '2026-07-28' }, undefined)).toBe('stateless');
    expect(classifyEra({ 'mcp-session-id': 'x', 'mcp-protocol-version': '2025-11-25' }, undefined)).toBe('session');
    expect(classifyEra({}, undefined)).toBe('session');
  });
});

describe('header value encoding', () => {
  it('decodes the Base64 sentinel and passes plain ASCII through', () => {
    expect(decodeHeaderValue('us-west1')).toEqual({ ok: true, value: 'us-west1' });
    expect(decodeHeaderValue('=?base64?SGVsbG8sIOS4lueVjA==?=')).toEqual({ ok: true, value: 'Hello, 世界' });
    expect(decodeHeaderValue('=?base64?IHBhZGRlZCA=?=')).toEqual({ ok: true, value: ' padded ' });
    expect(decodeHeaderValue('=?base64?bGluZTEKbGluZTI=?=')).toEqual({ ok: true, value: 'line1\nline2' });
    expect(decodeHeaderValue('=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?=')).toEqual({ ok: true, value: '=?base64?literal?=' });
  });
  it('rejects bad Base64, bad UTF-8 and unsafe plain values', () => {
    expect(decodeHeaderValue('=?base64?SGVsbG8?=').ok).toBe(false); // missing padding
    expect(decodeHeaderValue('=?base64?SGV*bG8=?=').ok).toBe(false); // outside the alphabet
    expect(decodeHeaderValue('=?base64?/w==?=').ok).toBe(false); // 0xff is not UTF-8
    expect(decodeHeaderValue('caf\u00e9').ok).toBe(false);
    expect(decodeHeaderValue('a\nb').ok).toBe(false);
  });
  it('encodes exactly the examples of the spec table', () => {
    expect(encodeHeaderValue('us-west1')).toBe('us-west1');
    expect(encodeHeaderValue('Hello, 世界')).toBe('=?base64?SGVsbG8sIOS4lueVjA==?=');
    expect(encodeHeaderValue(' padded ')).toBe('=?base64?IHBhZGRlZCA=?=');
    expect(encodeHeaderValue('line1\nline2')).toBe('=?base64?bGluZTEKbGluZTI=?=');
    expect(encodeHeaderValue('=?base64?literal?=')).toBe('=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?=');
    for (const v of ['x', 'Hello, 世界', ' a ', '=?base64?x?=']) {
      const d = decodeHeaderValue(encodeHeaderValue(v));
      expect(d).toEqual({ ok: true, value: v });
    }
  });
});

describe('validateStatelessRequest', () => {
  const check = (h: Headers, m: ReturnType<typeof req>) => validateStatelessRequest(h, m);

  it('accepts a well-formed request and reports what it names', () => {
    const r = check(hdr('tools/call', { 'mcp-name': 'tap' }), req('tools/call', { name: 'tap', arguments: {} }));
    expect(r.ok).toBe(true);
    if (r.ok) expect(r.info).toMatchObject({ method: 'tools/call', name: 'tap', protocolVersion: '2026-07-28' });
    expect(
      check(
        hdr('resources/read', { 'mcp-name': 'test://static-text' }),
        req('resources/read', { uri: 'test://static-text' }),
      ).ok,
    ).toBe(true);
    expect(check(hdr('server/discover'), req('server/discover')).ok).toBe(true);
  });
  it('accepts clientInfo absent (a SHOULD) and header names in any case, values trimmed', () => {
    const { ['io.modelcontextprotocol/clientInfo']: _, ...noInfo } = META;
    expect(check(hdr('tools/list'), req('tools/list', {}, noInfo)).ok).toBe(true);
    expect(check({ 'MCP-PROTOCOL-VERSION': '2026-07-28', 'MCP-METHOD': 'tools/list' }, req('tools/list')).ok).toBe(
      true,
    );
    expect(check(hdr('tools/call', { 'mcp-name': '  tap  ' }), req('tools/call', { name: 'tap' })).ok).toBe(true);
  });
  it('answers missing _meta fields with 400 / -32602', () => {
    for (const meta of [
      'none',
      {},
      { 'io.modelcontextprotocol/clientCapabilities': {} },
      { 'io.modelcontextprotocol/protocolVersion': '2026-07-28' },
    ]) {
      const r = check(hdr('server/discover'), req('server/discover', {}, meta));
      expect(r).toMatchObject({ ok: false, status: 400, error: { code: -32602 } });
    }
  });
  it('answers a missing or different MCP-Protocol-Version with 400 / -32020', () => {
    expect(check({ 'mcp-method': 'tools/list' }, req('tools/list'))).toMatchObject({
      ok: false,
      status: 400,
      error: { code: -32020 },
    });
    const r = check(
      hdr('server/discover'),
      req('server/discover', {}, { ...META, 'io.modelcontextprotocol/protocolVersion': 'v999.0.0' }),
    );
    expect(r).toMatchObject({ ok: false, status: 400, error: { code: -32020 } });
  });
  it('answers an unsupported version with 400 / -32022 and data {supported, requested}', () => {
    const v = '1900-01-01';
    const r = check(
      { 'mcp-protocol-version': v, 'mcp-method': 'tools/list' },
      req('tools/list', {}, { ...META, 'io.modelcontextprotocol/protocolVersion': v }),
    );
    expect(r.ok).toBe(false);
    if (!r.ok) {
      expect(r.status).toBe(400);
      expect(r.error.code).toBe(-32022);
      expect(r.error.data).toEqual({
        supported: ['2026-07-28', '2025-11-25', '2025-06-18', '2025-03-26'],
        requested: v,
      });
    }
    // a session revision in a stateless request is not served statelessly either
    const s = check(
      { 'mcp-protocol-version': '2025-11-25', 'mcp-method': 'tools/list' },
      req('tools/list', {}, { ...META, 'io.modelcontextprotocol/protocolVersion': '2025-11-25' }),
    );
    expect(s).toMatchObject({ ok: false, error: { code: -32022 } });
  });
  it('checks Mcp-Method: missing, different, or different case is 400 / -32020', () => {
    expect(check({ 'mcp-protocol-version': '2026-07-28' }, req('tools/list'))).toMatchObject({
      status: 400,
      error: { code: -32020 },
    });
    expect(check(hdr('prompts/list'), req('tools/list'))).toMatchObject({ status: 400, error: { code: -32020 } });
    expect(check(hdr('TOOLS/LIST'), req('tools/list'))).toMatchObject({ status: 400, error: { code: -32020 } });
  });
  it('answers removed and unknown methods with 404 / -32601', () => {
    for (const m of [
      'initialize',
      'ping',
      'logging/setLevel',
      'resources/subscribe',
      'resources/unsubscribe',
      'nope/nothing',
      // Removed by the tasks extension (SEP-2663): the result is inlined on tasks/get, no listing.
      'tasks/result',
      'tasks/list',
    ]) {
      expect(check(hdr(m), req(m))).toMatchObject({ ok: false, status: 404, error: { code: -32601 } });
    }
    for (const m of STATELESS_METHODS) {
      const named =
        m === 'tools/call' || m === 'prompts/get'
          ? { name: 'x' }
          : m === 'resources/read'
            ? { uri: 'x' }
            : m.startsWith('tasks/')
              ? { taskId: 'x' }
              : {};
      expect(check(hdr(m, { 'mcp-name': 'x' }), req(m, named)).ok).toBe(true);
    }
  });
  it('checks Mcp-Name, decoding the Base64 sentinel first', () => {
    expect(check(hdr('tools/call'), req('tools/call', { name: 'tap' }))).toMatchObject({
      status: 400,
      error: { code: -32020 },
    });
    expect(
      check(hdr('tools/call', { 'mcp-name': 'wrong_tool_name' }), req('tools/call', { name: 'tap' })),
    ).toMatchObject({ status: 400, error: { code: -32020 } });
    expect(
      check(hdr('prompts/get', { 'mcp-name': '=?base64?5pel5pys?=' }), req('prompts/get', { name: '日本' })).ok,
    ).toBe(true);
    expect(
      check(hdr('prompts/get', { 'mcp-name': '=?base64?5pel5pys' }), req('prompts/get', { name: '日本' })),
    ).toMatchObject({ status: 400, error: { code: -32020 } });
    expect(
      check(hdr('resources/read', { 'mcp-name': 'file:///a' }), req('resources/read', { uri: 'file:///b' })),
    ).toMatchObject({ status: 400, error: { code: -32020 } });
  });
  it('wants params.name / params.uri as strings (-32602)', () => {
    expect(check(hdr('tools/call', { 'mcp-name': 'x' }), req('tools/call', {}))).toMatchObject({
      status: 400,
      error: { code: -32602 },
    });
  });
});

describe('discoverResult', () => {
  it('maps the cached initialize result', () => {
    const init = {
      protocolVersion: '2025-11-25',
      capabilities: { tools: { listChanged: true }, logging: {} },
      serverInfo: { name: 'phone', version: '1.2.3' },
      instructions: 'Use tap.',
    };
    expect(discoverResult(init)).toEqual({
      resultType: 'complete',
      supportedVersions: ['2026-07-28'],
      capabilities: { tools: { listChanged: true }, logging: {} },
      instructions: 'Use tap.',
      _meta: { 'io.modelcontextprotocol/serverInfo': { name: 'phone', version: '1.2.3' } },
      ttlMs: 0,
      cacheScope: 'private',
    });
  });
  it('shows the tasks extension and never the 2025-11-25 tasks slot', () => {
    const caps = {
      tools: {},
      tasks: { list: {}, cancel: {}, requests: { tools: { call: {} } } },
      extensions: { 'io.modelcontextprotocol/tasks': {} },
    };
    expect(discoverResult({ capabilities: caps }).capabilities).toEqual({
      tools: {},
      extensions: { 'io.modelcontextprotocol/tasks': {} },
    });
    // The cached result itself is not changed (the session era answers initialize with it).
    expect(caps.tasks).toBeDefined();
  });
  it('copes with an empty cache', () => {
    expect(discoverResult(undefined)).toEqual({
      resultType: 'complete',
      supportedVersions: ['2026-07-28'],
      capabilities: {},
      ttlMs: 0,
      cacheScope: 'private',
    });
  });
});

describe('finishStatelessResult', () => {
  const si = { name: 'phone', version: '1' };
  it('adds resultType, caching hints on cacheable methods, and serverInfo', () => {
    expect(finishStatelessResult('tools/call', { content: [] }, { serverInfo: si })).toEqual({
      content: [],
      resultType: 'complete',
      _meta: { 'io.modelcontextprotocol/serverInfo': si },
    });
    expect(finishStatelessResult('resources/read', { contents: [] })).toEqual({
      contents: [],
      resultType: 'complete',
      ttlMs: 0,
      cacheScope: 'private',
    });
  });
  it('keeps what the phone set, and adds no caching hints to input_required', () => {
    expect(
      finishStatelessResult(
        'resources/read',
        { contents: [], resultType: 'complete', ttlMs: 5, cacheScope: 'public', _meta: { a: 1 } },
        { serverInfo: si },
      ),
    ).toEqual({
      contents: [],
      resultType: 'complete',
      ttlMs: 5,
      cacheScope: 'public',
      _meta: { a: 1, 'io.modelcontextprotocol/serverInfo': si },
    });
    expect(finishStatelessResult('tools/list', { resultType: 'input_required', requestState: 'x' })).toEqual({
      resultType: 'input_required',
      requestState: 'x',
    });
    expect(
      finishStatelessResult('tools/list', { tools: [], ttlMs: 9, cacheScope: 'public' }, { forcePrivate: true }),
    ).toMatchObject({ cacheScope: 'private', ttlMs: 9 });
  });

  it('does the same on bytes without re-serialising the rest', () => {
    const cases: Array<[string, unknown, Parameters<typeof finishStatelessResult>[2]]> = [
      ['tools/call', { content: [{ type: 'text', text: 'a "}{" b' }] }, { serverInfo: si }],
      ['tools/call', {}, { serverInfo: si }],
      ['resources/read', { contents: [], _meta: {} }, { serverInfo: si }],
      ['resources/read', { contents: [], _meta: { x: [1, { y: '}' }] } }, { serverInfo: si }],
      [
        'resources/read',
        { contents: [], _meta: { 'io.modelcontextprotocol/serverInfo': { name: 'own', version: '0' } } },
        { serverInfo: si },
      ],
      ['prompts/list', { prompts: [], resultType: 'complete', ttlMs: 3 }, {}],
      ['tools/call', { resultType: 'input_required', inputRequests: {} }, {}],
      ['tools/list', { tools: [], cacheScope: 'public' }, { forcePrivate: true }],
    ];
    for (const [method, result, opts] of cases) {
      for (const text of [
        JSON.stringify({ result, jsonrpc: '2.0', id: 3 }),
        `{ "jsonrpc" : "2.0", "id": 3, "result" : ${JSON.stringify(result, null, 1)} }`,
      ]) {
        const out = finishStatelessResultFrame(method, Buffer.from(text), opts);
        const parsed = JSON.parse(out.toString('utf8'));
        expect(parsed.result).toEqual(finishStatelessResult(method, result, opts));
        expect(parsed.id).toBe(3);
      }
    }
  });
  it('leaves error frames and malformed frames alone', () => {
    const err = Buffer.from('{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"x"}}');
    expect(finishStatelessResultFrame('tools/call', err)).toBe(err);
    const junk = Buffer.from('{"result":{');
    expect(finishStatelessResultFrame('tools/call', junk)).toBe(junk);
  });
});

describe('subscriptions/listen', () => {
  const caps = { tools: { listChanged: true }, resources: { subscribe: true, listChanged: false } };
  it('parses the filter and rejects bad shapes with -32602', () => {
    expect(
      parseSubscriptionFilter({
        notifications: { toolsListChanged: true, promptsListChanged: false, resourceSubscriptions: ['a', 'a'] },
      }),
    ).toEqual({
      ok: true,
      filter: { toolsListChanged: true, resourceSubscriptions: ['a'] },
    });
    expect(parseSubscriptionFilter({})).toMatchObject({ ok: false, error: { code: -32602 } });
    expect(parseSubscriptionFilter({ notifications: { toolsListChanged: 'yes' } })).toMatchObject({ ok: false });
    expect(parseSubscriptionFilter({ notifications: { resourceSubscriptions: [1] } })).toMatchObject({ ok: false });
  });
  it('acknowledges only what the phone can deliver', () => {
    const requested = {
      toolsListChanged: true,
      promptsListChanged: true,
      resourcesListChanged: true,
      resourceSubscriptions: ['test://a'],
    };
    expect(honouredFilter(requested, caps)).toEqual({ toolsListChanged: true });
    expect(honouredFilter(requested, caps, { resourceSubscriptions: true })).toEqual({
      toolsListChanged: true,
      resourceSubscriptions: ['test://a'],
    });
    expect(acknowledgeSubscription('listen-1', { toolsListChanged: true })).toEqual({
      jsonrpc: '2.0',
      method: 'notifications/subscriptions/acknowledged',
      params: {
        _meta: { 'io.modelcontextprotocol/subscriptionId': 'listen-1' },
        notifications: { toolsListChanged: true },
      },
    });
  });
  it('tags wanted notifications and drops the rest', () => {
    const honoured = { toolsListChanged: true, resourceSubscriptions: ['test://a'] };
    expect(
      subscriptionNotification({ jsonrpc: '2.0', method: 'notifications/tools/list_changed' }, 1, honoured),
    ).toEqual({
      jsonrpc: '2.0',
      method: 'notifications/tools/list_changed',
      params: { _meta: { 'io.modelcontextprotocol/subscriptionId': 1 } },
    });
    expect(
      subscriptionNotification(
        { jsonrpc: '2.0', method: 'notifications/resources/updated', params: { uri: 'test://a', _meta: { k: 1 } } },
        1,
        honoured,
      ),
    ).toEqual({
      jsonrpc: '2.0',
      method: 'notifications/resources/updated',
      params: { uri: 'test://a', _meta: { k: 1, 'io.modelcontextprotocol/subscriptionId': 1 } },
    });
    expect(
      subscriptionNotification({ method: 'notifications/resources/updated', params: { uri: 'test://b' } }, 1, honoured),
    ).toBeUndefined();
    expect(subscriptionNotification({ method: 'notifications/prompts/list_changed' }, 1, honoured)).toBeUndefined();
    expect(
      subscriptionNotification(
        { method: 'notifications/progress', params: { progressToken: 1, progress: 1 } },
        1,
        honoured,
      ),
    ).toBeUndefined();
    expect(
      subscriptionNotification({ method: 'notifications/message', params: { level: 'error' } }, 1, honoured),
    ).toBeUndefined();
  });
  it('closes gracefully with a complete result carrying the subscription id', () => {
    expect(subscriptionClosedResult('listen-1')).toEqual({
      jsonrpc: '2.0',
      id: 'listen-1',
      result: { resultType: 'complete', _meta: { 'io.modelcontextprotocol/subscriptionId': 'listen-1' } },
    });
    expect(subscriptionClosedResult(3, { name: 'p', version: '1' })).toEqual({
      jsonrpc: '2.0',
      id: 3,
      result: {
        resultType: 'complete',
        _meta: {
          'io.modelcontextprotocol/subscriptionId': 3,
          'io.modelcontextprotocol/serverInfo': { name: 'p', version: '1' },
        },
      },
    });
  });
  it('is served only to a client that lists text/event-stream in Accept (406 otherwise)', () => {
    expect(listenNotAcceptable('application/json, text/event-stream')).toBeUndefined();
    expect(listenNotAcceptable('text/event-stream')).toBeUndefined();
    for (const accept of [undefined, '', 'application/json', 'application/json, application/*;q=0.5', '*/*']) {
      expect(listenNotAcceptable(accept)).toMatchObject({
        code: -32600,
        message: expect.stringMatching(/^Not Acceptable/),
      });
    }
  });
});

describe('shouldForwardLog', () => {
  it('forwards only when the request asked, at or above its level', () => {
    const msg = (level: string) => ({ method: 'notifications/message', params: { level, data: 'x' } });
    expect(shouldForwardLog(META, msg('error'))).toBe(false);
    expect(shouldForwardLog({ ...META, 'io.modelcontextprotocol/logLevel': 'warning' }, msg('error'))).toBe(true);
    expect(shouldForwardLog({ ...META, 'io.modelcontextprotocol/logLevel': 'warning' }, msg('info'))).toBe(false);
    expect(shouldForwardLog(undefined, msg('emergency'))).toBe(false);
  });
});

describe('the tasks extension (SEP-2663)', () => {
  const check = validateStatelessRequest;
  const ext = { extensions: { 'io.modelcontextprotocol/tasks': {} } };
  const declaring = {
    'io.modelcontextprotocol/clientCapabilities': { extensions: { 'io.modelcontextprotocol/tasks': {} } },
  };
  it('needs Mcp-Name equal to params.taskId on tasks/get, tasks/update, tasks/cancel', () => {
    for (const m of ['tasks/get', 'tasks/update', 'tasks/cancel']) {
      expect(check(hdr(m, { 'mcp-name': 't-1' }), req(m, { taskId: 't-1' }))).toMatchObject({
        ok: true,
        info: { name: 't-1' },
      });
      expect(check(hdr(m), req(m, { taskId: 't-1' })), m).toMatchObject({ status: 400, error: { code: -32020 } });
      expect(check(hdr(m, { 'mcp-name': 't-2' }), req(m, { taskId: 't-1' })), m).toMatchObject({
        status: 400,
        error: { code: -32020 },
      });
      expect(check(hdr(m, { 'mcp-name': 't-1' }), req(m, {})), m).toMatchObject({
        status: 400,
        error: { code: -32602 },
      });
    }
  });
  it('refuses the task methods of a client that did not declare the extension with -32021', () => {
    for (const m of ['tasks/get', 'tasks/update', 'tasks/cancel']) {
      expect(checkTaskMethod(m, declaring, ext)).toEqual({ ok: true });
      const r = checkTaskMethod(m, { 'io.modelcontextprotocol/clientCapabilities': {} }, ext);
      expect(r).toMatchObject({
        ok: false,
        status: 400,
        error: {
          code: -32021,
          data: { requiredCapabilities: { extensions: { 'io.modelcontextprotocol/tasks': {} } } },
        },
      });
      expect(checkTaskMethod(m, undefined, ext)).toMatchObject({ status: 400, error: { code: -32021 } });
    }
  });
  it('answers -32601 when the phone does not offer the extension (its 2025-11-25 tasks do not count)', () => {
    const legacy = { tasks: { list: {}, cancel: {}, requests: { tools: { call: {} } } } };
    expect(checkTaskMethod('tasks/get', declaring, legacy)).toMatchObject({
      ok: false,
      status: 404,
      error: { code: -32601 },
    });
  });
  it('leaves other methods alone', () => {
    expect(checkTaskMethod('tools/call', undefined, {})).toEqual({ ok: true });
  });
  it('reads the declaration from the per-request client capabilities only', () => {
    expect(declaresTasks(declaring)).toBe(true);
    expect(declaresTasks({ 'io.modelcontextprotocol/clientCapabilities': { tasks: {} } })).toBe(false);
    expect(
      declaresTasks({
        'io.modelcontextprotocol/clientCapabilities': { extensions: { 'io.modelcontextprotocol/tasks': true } },
      }),
    ).toBe(false);
  });
  it('drops the legacy task member of a tools/call, and nothing else', () => {
    const p = { name: 'greet', arguments: { a: 1 }, task: { ttl: 1 }, _meta: { x: 1 } };
    expect(withoutLegacyTask(p)).toEqual({ name: 'greet', arguments: { a: 1 }, _meta: { x: 1 } });
    const q = { name: 'greet' };
    expect(withoutLegacyTask(q)).toBe(q);
    expect(withoutLegacyTask(undefined)).toBeUndefined();
  });
});
